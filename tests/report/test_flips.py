"""Per-sample flips (ragrepro.report.flips, `ragrepro compare A B --flips`, the dashboard's
payload): hand-written QA runs with known flips, and the committed Table 1 evidence (real
RALM perplexity runs) checked block by block against its samples.jsonl."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragrepro import evidence
from ragrepro.errors import ConfigError
from ragrepro.paths import REPO_ROOT
from ragrepro.report.compare import main
from ragrepro.report.dashboard import flips_payload
from ragrepro.report.flips import (
    GRADED_RIGHT_ABOVE,
    nll_flips,
    outcome_flips,
    pair_flips,
    same_within_noise,
    swap,
)
from ragrepro.report.runs import find_run, load_runs
from ragrepro.tracking import Run
from tests.report.flips_fixtures import qa_run

# -- pure classification ------------------------------------------------------------------


def test_binary_outcomes_counted_and_listed_in_record_order():
    keys = ["q0", "q1", "q2", "q3", "q4", "q5"]
    f = outcome_flips(keys, keys, [1, 1, 0, 0, 1, 0], [0, 1, 1, 0, 1, 1], "em")
    assert f.counts == {"right_to_wrong": 1, "wrong_to_right": 2, "both_right": 2,
                        "both_wrong": 1}
    assert [(i.label, i.change) for i in f.items] == [
        ("q0", "right_to_wrong"), ("q2", "wrong_to_right"), ("q5", "wrong_to_right")]
    assert not f.graded and f.rule == "right = em 1 (0/1 score)"


def test_graded_scores_right_above_half_and_listed_by_largest_change():
    assert GRADED_RIGHT_ABOVE == 0.5
    keys = ["a", "b", "c", "d", "e", "f"]
    a = [0.8, 0.4, 0.6, 0.2, 0.6, 0.5]
    b = [0.3, 0.9, 0.55, 0.1, 0.0, 0.75]   # f: 0.5 is not above 0.5, so wrong -> right
    f = outcome_flips(keys, keys, a, b, "f1_squad")
    assert f.graded and f.counts == {"right_to_wrong": 2, "wrong_to_right": 2,
                                     "both_right": 1, "both_wrong": 1}
    # right->wrong first (e: -0.6 before a: -0.5), then wrong->right (b: +0.5, f: +0.25)
    assert [(i.label, round(i.delta, 6)) for i in f.items] == [
        ("e", -0.6), ("a", -0.5), ("b", 0.5), ("f", 0.25)]


def test_a_score_outside_zero_one_has_no_outcome():
    with pytest.raises(ConfigError, match="outside \\[0, 1\\]"):
        outcome_flips(["q"], ["q"], [3.0], [1.0], "seconds")


def test_perplexity_blocks_better_worse_and_noise_is_the_same():
    assert same_within_noise(2.0, 2.0 + 1e-6)          # 5e-7 relative: float noise
    assert not same_within_noise(2.0, 2.0 + 1e-3)
    keys = [(0, 0), (0, 1), (0, 9), (1, 0)]
    spans = [(0, 0, 0), (0, 1, 8), (0, 9, 9), (1, 0, 3)]
    f = nll_flips(keys, spans, [2.0, 2.0, 3.0, 1.0], [2.0 + 1e-6, 2.5, 2.0, 1.2],
                  "ppl_token", "token", "blocks")
    assert f.counts == {"worse": 2, "better": 1, "same": 1}
    assert [(i.label, i.change) for i in f.items] == [
        ("text 0 windows 1-8", "worse"), ("text 1 windows 0-3", "worse"),
        ("text 0 window 9", "better")]


def test_swap_is_the_same_flips_read_the_other_way():
    keys = ["q0", "q1", "q2", "q3"]
    a, b = [1, 0, 1, 0], [0, 1, 1, 1]
    assert swap(outcome_flips(keys, keys, a, b, "em")) == outcome_flips(keys, keys, b, a, "em")
    spans = [(0, 0, 0), (0, 1, 1), (0, 2, 2), (0, 3, 3)]
    x, y = [2.0, 2.5, 1.0, 3.0], [2.2, 2.0, 1.0, 3.5]
    assert swap(nll_flips(keys, spans, x, y, "ppl_token", "token", "blocks")) == \
        nll_flips(keys, spans, y, x, "ppl_token", "token", "blocks")


# -- hand-written QA runs -------------------------------------------------------------------
@pytest.fixture
def qa_results(tmp_path: Path) -> Path:
    qa_run(tmp_path, "qa0docs", 0, 0)
    qa_run(tmp_path, "qa2docs", 1, 2)
    return tmp_path


def test_pair_flips_on_written_runs(qa_results):
    a, b = find_run(qa_results, "qa0docs"), find_run(qa_results, "qa2docs")
    f, why = pair_flips(a, b)
    assert why == "" and f is not None and f.metric == "em" and f.n == 5
    assert f.counts == {"right_to_wrong": 1, "wrong_to_right": 2, "both_right": 1,
                        "both_wrong": 1}
    assert [(i.label, i.change, i.a, i.b) for i in f.items] == [
        ("q0", "right_to_wrong", 1.0, 0.0), ("q1", "wrong_to_right", 0.0, 1.0),
        ("q4", "wrong_to_right", 0.0, 1.0)]


def test_compare_flips_prints_counts_beside_the_paired_test_and_both_outputs(qa_results,
                                                                             capsys):
    main(["qa0docs", "qa2docs", "--results", str(qa_results), "--flips", "--resamples", "200"])
    out = capsys.readouterr().out.split("Per-sample flips against [1]")[1]
    lines = out.splitlines()
    assert lines[1] == "[2] vs [1]: em on 5 questions; right = em 1 (0/1 score)"
    # 3 of 5 questions are +1 or -1, 2 unchanged: exact permutation over 2**5 patterns, the
    # difference +1/5 = +0.2; its p is the same as the paired block above prints
    assert lines[2].startswith("  right→wrong 1, wrong→right 2, both right 1, both wrong 1"
                               "   paired em ([2] - [1]): +0.2 [")
    assert "right→wrong (1 of 1 shown, record order):" in out
    assert "wrong→right (2 of 2 shown, record order):" in out
    rows = {ln.split()[0]: ln for ln in lines if ln.strip().startswith("q")}
    assert sorted(rows) == ["q0", "q1", "q4"]                  # q2, q3 did not change
    q0 = rows["q0"].split()
    assert q0[:4] == ["q0", "Capital", "of", "France?"]
    assert q0[4:] == ["Paris", "Paris", "Lyon", "1", "0", "eos", "length"]
    assert rows["q4"].split()[-6:] == ["Ag", "Au", "0", "1", "eos", "stop"]


def test_compare_flips_limit_and_other_order(qa_results, capsys):
    main(["qa2docs", "qa0docs", "--results", str(qa_results), "--flips", "--limit", "1",
          "--resamples", "200"])
    out = capsys.readouterr().out
    assert "right→wrong 2, wrong→right 1, both right 1, both wrong 1" in out
    assert "right→wrong (1 of 2 shown, record order):" in out
    listed = [ln.split()[0] for ln in out.split("Per-sample flips")[1].splitlines()
              if ln.strip().startswith("q")]
    assert listed == ["q1", "q0"]
    main(["qa2docs", "qa0docs", "--results", str(qa_results), "--flips", "--limit", "0",
          "--resamples", "200"])
    assert "right→wrong (2 of 2 shown, record order):" in capsys.readouterr().out


def test_compare_flips_bad_input(qa_results, capsys):
    with pytest.raises(ConfigError, match="--metric emm: not recorded by ralm/table4/qa0docs, "
                       "ralm/table4/qa2docs. Did you mean 'em'.* record: em, num_examples"):
        main(["qa0docs", "qa2docs", "--results", str(qa_results), "--flips", "--metric", "emm"])
    # recorded, but no per-sample field behind it: said in the listing, not a crash
    main(["qa0docs", "qa2docs", "--results", str(qa_results), "--flips", "--metric",
          "num_examples", "--resamples", "50"])
    assert "[2] vs [1]: (no per-sample records reproducing num_examples in both runs)" in \
        capsys.readouterr().out
    with pytest.raises(SystemExit) as e:           # --limit without --flips: a usage error
        main(["qa0docs", "qa2docs", "--results", str(qa_results), "--limit", "3"])
    assert e.value.code == 2
    assert "add --flips" in capsys.readouterr().err


def test_dashboard_payload_pairs_runs_of_one_experiment(qa_results):
    runs = load_runs(qa_results)
    assert [r.run_id for r in runs] == ["qa0docs", "qa2docs"]
    data = flips_payload(runs)
    pair = data["pairs"]["0,1"]
    assert pair["counts"] == {"right_to_wrong": 1, "wrong_to_right": 2, "both_right": 1,
                              "both_wrong": 1}
    assert [i["label"] for i in pair["items"]] == ["q0", "q1", "q4"]
    assert pair["paired"][0].startswith("+0.2 [") and pair["paired"][1].startswith("-0.2 [")
    assert data["texts"]["0"]["q0"] == {"question": "Capital of France?", "gold": "Paris",
                                        "output": "Paris", "finish": "eos"}
    assert data["texts"]["1"]["q0"]["output"] == "Lyon"
    assert data["texts"]["1"]["q0"]["finish"] == "length"


# -- real perplexity runs: the committed Table 1 evidence ---------------------------------------
@pytest.fixture(scope="module")
def table1(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("table1") / "results"
    evidence.unpack(evidence.bundle_path(REPO_ROOT / "results", "ralm/table1"), root)
    return root


def _run_of(root: Path, model: str, rerank: str):
    hits = [r for r in load_runs(root) if r.settings.get("model") == model
            and r.settings.get("rerank") == rerank]
    assert len(hits) == 1
    return hits[0]


def _windows(run) -> list[dict]:
    return [json.loads(ln) for ln in (run.dir / "samples.jsonl").read_text().splitlines()]


def _blocks_by_hand(windows: list[dict]) -> dict[tuple[int, int], tuple[float, float]]:
    """(text, first window) -> (NLL sum, scored tokens): consecutive windows of one text
    until a block holds >= 128 scored tokens (docs/statistics.md)."""
    out: dict[tuple[int, int], list[float]] = {}
    key = None
    for w in sorted(windows, key=lambda w: (w["text"], w["window"])):
        if key is None or key[0] != w["text"] or out[key][1] >= 128:
            key = (w["text"], w["window"])
            out[key] = [0.0, 0.0]
        out[key][0] += w["nll_sum"]
        out[key][1] += w["n_scored"]
    return {k: (v[0], v[1]) for k, v in out.items()}


def test_real_perplexity_runs_blocks_better_and_worse(table1):
    none = _run_of(table1, "smollm2-135m", "none")
    bm25 = _run_of(table1, "smollm2-135m", "first")
    f, why = pair_flips(none, bm25)
    assert why == "" and f is not None and f.metric == "ppl_token" and f.kind == "nll"
    # by hand from the two samples.jsonl: each block's NLL per token with and without BM25
    ha, hb = _blocks_by_hand(_windows(none)), _blocks_by_hand(_windows(bm25))
    assert sorted(ha) == sorted(hb) and len(ha) == 9 == f.n
    per_a = {k: s / t for k, (s, t) in ha.items()}
    per_b = {k: s / t for k, (s, t) in hb.items()}
    worse = sorted(k for k in ha if per_b[k] - per_a[k] > 1e-5 * per_a[k])
    better = sorted(k for k in ha if per_a[k] - per_b[k] > 1e-5 * per_a[k])
    assert f.counts == {"worse": len(worse), "better": len(better),
                        "same": 9 - len(worse) - len(better)}
    assert f.counts == {"worse": 5, "better": 3, "same": 1}      # measured (README Table 1)
    assert sorted(i.key for i in f.of("worse")) == worse
    # the one "same" block is window 0: the first window never has a document
    assert [k for k in ha if k not in worse + better] == [(0, 0)]
    # one block by hand: windows 17-24 (8 windows of 16 scored tokens)
    item = next(i for i in f.items if i.key == (0, 17))
    assert item.label == "text 0 windows 17-24" and item.change == "worse"
    wa = [w for w in _windows(none) if 17 <= w["window"] <= 24]
    wb = [w for w in _windows(bm25) if 17 <= w["window"] <= 24]
    assert sum(w["n_scored"] for w in wa) == 128
    assert item.a == pytest.approx(sum(w["nll_sum"] for w in wa) / 128, rel=1e-12)
    assert item.b == pytest.approx(sum(w["nll_sum"] for w in wb) / 128, rel=1e-12)
    assert f.of("worse")[0] == item                  # the largest increase is listed first


def test_real_perplexity_compare_shows_documents_side_by_side(table1, capsys):
    none = _run_of(table1, "smollm2-135m", "none")
    bm25 = _run_of(table1, "smollm2-135m", "first")
    main([none.run_id, bm25.run_id, "--results", str(table1), "--flips", "--limit", "1"])
    out = capsys.readouterr().out.split("Per-sample flips against [1]")[1]
    assert "  worse 5, better 3, same 1   paired ppl_token ([2] - [1]): +0.09249 " \
           "[-0.1619, +0.3662] p=0.578 ≈0 (CI includes 0)" in out
    assert "worse (1 of 5 shown, largest change first):" in out
    assert "better (1 of 3 shown, largest change first):" in out
    block = out.split("text 0 windows 17-24: NLL per token [1] ")[1].split("better (")[0]
    rows = [ln.split() for ln in block.splitlines()[3:] if ln.strip()]
    assert [r[0] for r in rows] == [str(w) for w in range(17, 25)]
    w17 = next(w for w in _windows(bm25) if w["window"] == 17)
    # the window's query, no document without retrieval, BM25's document with its id
    assert rows[0][-4:] == ["(no", "document)", w17["doc_title"], f"[{w17['doc_pid']}]"]
    assert " ".join(w17["query"].split()) in " ".join(rows[0])


def _filco_run(root: Path, run_id: str, scores: list[float]) -> None:
    """FilCo's record shape: a graded per-question `score` (a fraction), recorded x100."""
    run = Run("filco/table5", run_id, root)
    run.start()
    for i, v in enumerate(scores):
        run.add_sample({"qid": f"f{i}", "setting": run_id, "question": f"question {i}",
                        "answers": [f"gold {i}"], "raw_output": f"answer {i} {v}",
                        "prediction": f"answer {i} {v}", "score": v})
    run.finish({"name": "filco/table5"},
               {"score": 100 * sum(scores) / len(scores), "metric": "f1_squad"},
               {"model": "m", "method": run_id}, {})


def test_graded_filco_scores_through_compare(tmp_path, capsys):
    _filco_run(tmp_path, "full", [0.9, 0.2, 0.6, 0.7, 0.4])
    _filco_run(tmp_path, "filco", [0.1, 0.8, 0.65, 0.5, 0.3])
    f, why = pair_flips(find_run(tmp_path, "full"), find_run(tmp_path, "filco"))
    assert why == "" and f is not None and f.metric == "score" and f.graded
    # f3: 0.7 -> 0.5 (0.5 is not above 0.5: right -> wrong); f2 stays right; f4 stays wrong
    assert f.counts == {"right_to_wrong": 2, "wrong_to_right": 1, "both_right": 1,
                        "both_wrong": 1}
    assert [(i.label, i.change) for i in f.items] == [
        ("f0", "right_to_wrong"), ("f3", "right_to_wrong"), ("f1", "wrong_to_right")]
    main(["full", "filco", "--results", str(tmp_path), "--flips", "--resamples", "100"])
    out = capsys.readouterr().out
    assert "[2] vs [1]: score on 5 questions; right = score > 0.5 (graded score)" in out
    assert "right→wrong (2 of 2 shown, largest change first):" in out
    # per-sample scores as the records store them (fractions; the run's score is x100)
    f0 = next(ln for ln in out.splitlines() if ln.strip().startswith("f0 "))
    assert f0.split() == ["f0", "question", "0", "gold", "0", "answer", "0", "0.9", "answer",
                          "0", "0.1", "0.9", "0.1"]
