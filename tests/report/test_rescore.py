"""Rescoring (ragrepro/rescore.py): metrics recomputed from finished runs' saved samples into
new runs that record their source, with no model load; Table 1 perplexities reproduced to
the last bit; QA under other normalisations against hand-computed values."""
from __future__ import annotations

import random

import pytest

from ragrepro import attest, evidence, rescore
from ragrepro.cli import user_errors_exit_2
from ragrepro.errors import DataError
from ragrepro.metrics import get_metric
from ragrepro.metrics.registry import computable
from ragrepro.paths import REPO_ROOT
from ragrepro.report import results_tables
from ragrepro.report.runs import experiment_runs
from ragrepro.results_check import check_experiment
from ragrepro.run_files import read_metrics, read_records
from ragrepro.tracking import Run, read_csv

TABLE1_BUNDLE = evidence.bundle_path(REPO_ROOT / "results", "ralm/table1")

# A RALM-QA-like run: prediction, gold answers, prompt (has_answer reads the prompt).
QA = [
    {"qid": "q1", "prediction": "The Beatles.", "answers": ["the Beatles"],
     "prompt": "Doc: The Beatles were a band.\nQ: who?", "em": 1.0},
    {"qid": "q2", "prediction": "Paris, France", "answers": ["Paris"],
     "prompt": "Doc: Lyon.\nQ: where?", "em": 0.0},
    {"qid": "q3", "prediction": "an apple", "answers": ["Apple", "pear"],
     "prompt": "Doc: a PEAR tree.\nQ: what?", "em": 1.0},
    {"qid": "q4", "prediction": "", "answers": ["x"], "prompt": "Q: ?", "em": 0.0},
]
QA_SETTINGS = {"method": "ralm-qa", "model": "m", "dataset": "d", "k": 2}


@pytest.fixture(autouse=True)
def _no_model_loads(monkeypatch):
    """Rescoring must never load a model or a tokenizer: every loader raises."""
    import transformers

    from ragrepro.models import lm, loading

    def refuse(*_a, **_k):
        raise AssertionError("a model or tokenizer was loaded while rescoring")

    monkeypatch.setattr(lm, "load_lm", refuse)
    monkeypatch.setattr(loading, "load_pretrained", refuse)
    for cls in (transformers.AutoModelForCausalLM, transformers.AutoModelForSeq2SeqLM,
                transformers.AutoTokenizer, transformers.AutoModel):
        monkeypatch.setattr(cls, "from_pretrained", refuse)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "cache"))


def _qa_run(root, run_id="qa1", records=QA):
    run = Run("x/qa", run_id, root)
    run.start()
    for r in records:
        run.add_sample(r)
    em = get_metric("em_squad")
    run.finish({"name": "x/qa", "model": {"name": "m"}},
               {"em": em.aggregate([r["em"] for r in records]), "n": len(records)},
               dict(QA_SETTINGS), {"git_commit": "abc"})
    return run


def _table1(tmp_path):
    root = tmp_path / "results"
    evidence.unpack(TABLE1_BUNDLE, root)
    return root


def _cli(capsys, *argv):
    capsys.readouterr()
    status = user_errors_exit_2(lambda: rescore.main(list(argv)))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_another_normalisation_gives_the_hand_computed_em_and_f1(tmp_path, capsys):
    source = _qa_run(tmp_path)
    status, out, _ = _cli(capsys, "x/qa", "--metric", "em_squad", "--metric", "f1_squad",
                          "--normalization", "filco_code", "--results", str(tmp_path))
    assert status == 0
    (target,) = experiment_runs(tmp_path, "rescored/x/qa")
    # filco_code keeps punctuation: "beatles." != "beatles", "paris," != "paris";
    # "an apple" -> "apple" == "apple": EM 1/4; token F1 1/4 as well
    assert target.metrics == {"em_filco_code": 0.25, "f1_filco_code": 0.25, "n": 4}
    assert f"x/qa/qa1 -> rescored/x/qa/{target.run_id}: em_filco_code=0.25 " \
           f"f1_filco_code=0.25 n=4" in out
    records = read_records(target.dir / "samples.jsonl", finished=True)
    assert [r["em_filco_code"] for r in records] == [0.0, 0.0, 1.0, 0.0]
    assert [r["f1_filco_code"] for r in records] == [0.0, 0.0, 1.0, 0.0]
    assert [{k: r[k] for k in QA[0]} for r in records] == QA  # the source's fields kept
    # and it records where it came from
    data = read_metrics(target.dir / "metrics.json")
    source_att = attest.attestation(QA)
    assert data["rescored_from"] == {"experiment": "x/qa", "run_id": "qa1",
                                     "attestation": source_att}
    assert data["rescore"] == {"metrics": ["em_squad", "f1_squad"],
                               "normalization": "filco_code",
                               "columns": ["em_filco_code", "f1_filco_code"]}
    assert data["metadata"]["attestation"] == attest.attestation(records) != source_att
    assert data["settings"] == {**QA_SETTINGS, "rescore_metrics": "em_filco_code,f1_filco_code",
                                "rescore_normalization": "filco_code"}
    (row,) = read_csv(tmp_path / "rescored" / "x" / "qa.csv")
    assert row["rescored_from"] == "x/qa/qa1"
    assert row["attestation"] == data["metadata"]["attestation"]
    assert (row["model"], row["k"], row["em_filco_code"]) == ("m", "2", "0.25")
    assert check_experiment(tmp_path, "rescored/x/qa") == []
    assert source.final_dir.is_dir()


def test_lowercase_and_the_registry_own_normalisations(tmp_path):
    _qa_run(tmp_path)
    spec = rescore.Spec.of(["em_squad", "f1_squad", "has_answer"], "lowercase")
    (out,) = rescore.rescore(tmp_path, "x/qa", spec)
    # lowercase keeps punctuation and articles: no exact match; token F1 per question
    # q1 {the, beatles.} vs {the, beatles}: 1/2; q3 {an, apple} vs {apple}: 2/3
    assert out.metrics["em_lowercase"] == 0.0
    assert out.metrics["f1_lowercase"] == pytest.approx((0.5 + 2 / 3) / 4, abs=1e-15)
    # has_answer in the prompt, lower-cased: q1 "the beatles" and q3 "pear" are there
    assert out.metrics["has_answer_lowercase"] == 0.5
    # without --normalization: the registry's functions, which reproduce the recorded EM
    (own,) = rescore.rescore(tmp_path, "x/qa", rescore.Spec.of(["em_squad", "f1_squad"], None))
    assert own.metrics["em_squad"] == 0.5
    assert own.metrics["f1_squad"] == pytest.approx((1 + 2 / 3 + 1 + 0) / 4, abs=1e-15)
    assert own.target != out.target
    # a metric's own normalisation named explicitly is the same computation and column
    (same,) = rescore.rescore(tmp_path, "x/qa", rescore.Spec.of(["em_squad"], "squad"))
    assert same.metrics == {"em_squad": 0.5, "n": 4}


def test_kernels_under_the_native_normalisation_equal_the_registry():
    rng = random.Random(0)
    words = ["The", "the", "a", "An", "Beatles", "beatles.", "Paris,", "paris", "x", "!", ""]
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 4))) for _ in range(300)]
    for name, info in rescore.ANSWER_METRICS.items():
        kernel = rescore.FAMILIES[info.family](rescore.NORMALIZATIONS[info.native])
        fn = get_metric(name).fn
        for i in range(0, 300, 3):
            answers = [texts[i + 1], texts[i + 2]]
            assert kernel(texts[i], answers) == fn(texts[i], answers), (name, texts[i], answers)


def test_a_rerun_skips_what_it_finished_and_a_changed_source_gets_a_new_run(tmp_path):
    _qa_run(tmp_path)
    spec = rescore.Spec.of(["em_squad"], "lowercase")
    (first,) = rescore.rescore(tmp_path, "x/qa", spec)
    (again,) = rescore.rescore(tmp_path, "x/qa", spec)
    assert again.target == first.target and again.skipped.startswith("finished earlier")
    assert again.metrics == first.metrics
    # reordered metrics on the command line: the same spec, the same run
    (two,) = rescore.rescore(tmp_path, "x/qa", rescore.Spec.of(["f1_squad", "em_squad"], None))
    (owt,) = rescore.rescore(tmp_path, "x/qa", rescore.Spec.of(["em_squad", "f1_squad"], None))
    assert owt.target == two.target and owt.skipped
    # the source rerun with other outputs (overwrite): its attestation changes, so does the id
    _qa_run(tmp_path, records=[dict(QA[0], prediction="Beatles")] + QA[1:])
    (changed,) = rescore.rescore(tmp_path, "x/qa", spec)
    assert changed.target != first.target and not changed.skipped
    assert len(read_csv(tmp_path / "rescored" / "x" / "qa.csv")) == 3


def test_table1_perplexities_are_reproduced_exactly(tmp_path):
    root = _table1(tmp_path)
    outcomes = rescore.rescore(root, "ralm/table1",
                               rescore.Spec.of(["ppl_word", "ppl_token"], None))
    assert len(outcomes) == 12
    sources = {r.run_id: r for r in experiment_runs(root, "ralm/table1")}
    targets = experiment_runs(root, "rescored/ralm/table1")
    assert len(targets) == 12
    for t in targets:
        src = sources[t.metrics_json["rescored_from"]["run_id"]]
        for key in ("nll_sum", "ppl_word", "ppl_token", "n_tokens", "n_words",
                    "n_scored_tokens", "n_windows"):
            assert t.metrics[key] == src.metrics[key], (src.run_id, key)  # every bit
        for key, value in src.settings.items():
            assert t.settings[key] == value
        # the windows are copied unchanged: the same outputs, the same attestation
        assert t.metadata["attestation"] == attest.of_run(src.dir).value \
            == t.metrics_json["rescored_from"]["attestation"]


def test_table1_rescored_table_equals_the_source_table(tmp_path, capsys):
    root = _table1(tmp_path)
    rescore.rescore(root, "ralm/table1", rescore.Spec.of(["ppl_word", "ppl_token"], None))
    results_tables.main(["ralm/table1", "--method", "--results", str(root)])
    results_tables.main(["ralm/table1", "--method", "--experiment", "rescored/ralm/table1",
                         "--results", str(root)])

    def rows(path):
        return [line for line in path.read_text().splitlines() if line.startswith("| ")]

    mine = rows(root / "rescored" / "ralm" / "table1.md")
    assert len(mine) >= 13 and mine == rows(root / "ralm" / "table1.md")  # header + 12 runs


def test_window_order_in_the_file_does_not_move_the_sum(tmp_path):
    """The NLLs are summed in the pipeline's order (stream, window), not the file's: float
    addition is not associative, and these three sum differently in the two orders."""
    nlls = [0.1, 0.2, 0.3]
    assert (nlls[0] + nlls[1]) + nlls[2] != (nlls[2] + nlls[1]) + nlls[0]  # the case is real
    run = Run("x/lm", "w1", tmp_path)
    run.start()
    for i in (2, 1, 0):  # written last window first (e.g. a resumed run)
        run.add_sample({"text": 0, "window": i, "nll_sum": nlls[i], "n_scored": 1})
    recorded = float(sum(nlls))  # ralm.lm_eval.aggregate: windows in order
    run.finish({"name": "x/lm"}, {"nll_sum": recorded, "n_tokens": 3}, {"model": "m"}, {})
    (out,) = rescore.rescore(tmp_path, "x/lm", rescore.Spec.of(["ppl_token"], None))
    assert out.metrics["nll_sum"] == recorded
    assert out.metrics["ppl_token"] == get_metric("ppl_token").aggregate([(recorded, 3)])
    assert "ppl_word" not in out.metrics


def test_every_registered_metric_is_rescorable_or_refused_with_a_reason():
    assert set(computable()) <= set(rescore.rescorable()) | set(rescore.NOT_RESCORABLE)


@pytest.mark.parametrize("argv, message", [
    (["--metric", "em_sqaud"], "--metric 'em_sqaud': unknown metric. Did you mean 'em_squad'"),
    (["--metric", "unigram_precision"], "cannot be recomputed from saved samples"),
    (["--metric", "em_squad", "--normalization", "sqad"],
     "--normalization 'sqad' is not one of squad"),
    (["--metric", "ppl_word", "--normalization", "lowercase"],
     "--normalization applies to answer metrics"),
    (["--metric", "ppl_word"], ("--metric ppl_word needs the per-sample field `nll_sum`, "
                                "which x/qa/qa1 does not save")),
    (["--metric", "em_squad", "--run", "zz"], "--run zz: no run of x/qa"),
    (["--metric", "em_squad", "--into", "x/qa"], "rescored runs go to another experiment"),
])
def test_bad_input_exits_2_naming_the_problem(tmp_path, capsys, argv, message):
    _qa_run(tmp_path)
    with pytest.raises(SystemExit) as e:
        _cli(capsys, "x/qa", *argv, "--results", str(tmp_path))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err
    assert not (tmp_path / "rescored").exists()  # refused before anything was written


def test_a_qa_metric_on_perplexity_windows_names_the_missing_field(tmp_path, capsys):
    root = _table1(tmp_path)
    with pytest.raises(SystemExit) as e:
        _cli(capsys, "ralm/table1", "--metric", "f1_squad", "--run", "039f",
             "--results", str(root))
    assert e.value.code == 2
    assert "needs the per-sample field `prediction`" in capsys.readouterr().err


def test_a_missing_count_is_named(tmp_path):
    run = Run("x/lm", "w1", tmp_path)
    run.start()
    run.add_sample({"text": 0, "window": 0, "nll_sum": 3.0, "n_scored": 2})
    run.finish({"name": "x/lm"}, {"nll_sum": 3.0, "n_tokens": 2}, {"model": "m"}, {})
    (out,) = rescore.rescore(tmp_path, "x/lm", rescore.Spec.of(["ppl_token"], None))
    assert out.metrics["ppl_token"] == pytest.approx(2.718281828459045 ** 1.5, rel=1e-15)
    with pytest.raises(DataError, match="needs the count `n_words`"):
        rescore.rescore(tmp_path, "x/lm", rescore.Spec.of(["ppl_word"], None))


def test_help_names_the_metrics_and_normalisations(capsys):
    with pytest.raises(SystemExit) as e:
        rescore.main(["--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for name in (*rescore.rescorable(), *rescore.NORMALIZATIONS, "--into", "rescored/"):
        assert name in text


def test_the_subcommands_are_registered():
    from ragrepro.cli import SUBCOMMANDS

    assert SUBCOMMANDS["rescore"] == "ragrepro.rescore:main"
    assert SUBCOMMANDS["attest"] == "ragrepro.report.attest_cli:main"
