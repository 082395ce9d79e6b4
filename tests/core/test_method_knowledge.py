"""Issue 31 item 2: what only one method knows lives in that method, declared by its profile,
and the core finds it through the registry: FilCo's code-mode metrics, RICHES's key_closed
finish reason, the papers' evaluation sizes, FilCo's ctx_empty flag, the methods' sample
fields and dashboard columns. Each move is checked twice: the core no longer holds it
(static), and what the harness computes from it is what it computed before (numbers)."""
from __future__ import annotations

import dataclasses
import inspect
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import yaml

import filco.profile
import ralm.profile
import riches.profile
from ragrepro import generation, methods, rescore
from ragrepro.errors import ConfigError
from ragrepro.methods import (
    MethodProfile,
    PlannerHooks,
    RehearsalHooks,
    eval_size,
    profiles_from,
)
from ragrepro.metrics import builtin, get_metric, qa, registry
from ragrepro.paths import CONF_DIR, REPO_ROOT
from ragrepro.report import flags as fl
from ragrepro.report import sample_view as sv
from ragrepro.report.runs import experiment_runs
from ragrepro.report.spec import load_dashboard_spec
from ragrepro.run_files import read_records
from ragrepro.tracking import Run

CORE_METRICS = REPO_ROOT / "ragrepro" / "metrics"
# The split sizes ragrepro/methods.py held as EVAL_SIZE before the move.
OLD_EVAL_SIZE = {"wikitext-103": 245_569, "nq-open": 3_610, "nq-open-dpr": 3_610,
                 "triviaqa": 11_313, "triviaqa-dpr": 11_313, "hotpotqa": 7_405, "musique": 2_417,
                 "fever": 10_444, "wow": 3_054, "eli5": 1_507}


# -- metrics -------------------------------------------------------------------------------
def test_the_core_metrics_hold_no_filco_code_metric():
    for path in sorted(CORE_METRICS.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for name in ("filco_code", "normalize_filco", "char_f1_filco"):
            assert name not in text, (path.name, name)
    assert not hasattr(qa, "em_filco_code") and not hasattr(qa, "normalize_filco_code")
    # rescoring's own normalisations are the core's; FilCo's comes with its metrics
    assert "filco_code" not in rescore.CORE_NORMALIZATIONS
    assert "normalize_filco_code" not in inspect.getsource(rescore)


def test_filco_code_metrics_by_name_give_the_hand_computed_values():
    em, f1 = get_metric("em_filco_code"), get_metric("f1_char_filco_code")
    assert em.fn.__module__ == f1.fn.__module__ == "filco.metrics"
    # punctuation kept, articles dropped, case folded
    assert em.fn("Beatles.", ["the Beatles"]) == 0.0
    assert em.fn("The  BEATLES", ["beatles"]) == 1.0
    # character bags: "cat." vs "cat": P = 3/4, R = 1, F1 = 6/7; an anagram matches fully
    assert f1.fn("the cat.", ["cat"]) == pytest.approx(6 / 7, abs=1e-15)
    assert f1.fn("abc", ["zz", "cba"]) == 1.0
    assert f1.fn("", ["x"]) == 0.0
    assert em.aggregate([1.0, 0.0, 0.0, 1.0]) == 0.5


def test_one_record_per_metric_with_its_direction_stated_once():
    table = registry.metric_table()
    assert all(isinstance(m, registry.Metric) for m in table.values())
    assert registry.MetricInfo is registry.Metric
    # the facts the report read from the second table before, unchanged
    code = registry.metric_info("em_filco_code")
    assert (code.label, code.scale, code.unit, code.higher_is_better, code.aggregation) == (
        "exact match, FilCo eval.py normalisation (%)", 100, "%", True, "mean")
    ppl = registry.metric_info("ppl_word")
    assert (ppl.higher_is_better, ppl.aggregation, ppl.count, ppl.fn) == (
        False, "perplexity", "n_words", builtin.perplexity.ppl_word)
    assert registry.metric_info("em").same_as == "em_squad"
    assert registry.metric_info("no_such_column") == registry.Metric("no_such_column")
    # the dashboard's headline order, as the old table listed it
    assert registry.headline_metrics() == (
        "ppl_word", "ppl_token", "em_squad", "f1_squad", "em_filco_code", "f1_char_filco_code",
        "accuracy", "has_answer", "autoais", "unigram_precision", "recall_at_k")
    # a reported column without a function is looked up, never computed
    with pytest.raises(ConfigError, match="Unknown metric 'n_tokens'"):
        get_metric("n_tokens")
    with pytest.raises(ValueError, match="resample must be one of"):
        registry.Metric("x", resample="bootstrap")


def test_a_profile_metric_that_clashes_is_refused(monkeypatch):
    clash = dataclasses.replace(filco.profile.PROFILE, name="other",
                                metrics=(registry.Metric("em_filco_code", "other label"),))
    monkeypatch.setattr(registry, "registered",
                        lambda: (filco.profile.PROFILE, clash))
    registry._table.cache_clear()
    try:
        with pytest.raises(ConfigError, match="already declares differently: rename one"):
            registry.metric_table()
    finally:
        monkeypatch.undo()
        registry._table.cache_clear()


def test_rescore_finds_filcos_metrics_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path / "cache"))
    run = Run("x/qa", "qa1", tmp_path)
    run.start()
    records = [{"qid": "q1", "prediction": "The Beatles.", "answers": ["the Beatles"]},
               {"qid": "q2", "prediction": "Paris, France", "answers": ["Paris"]},
               {"qid": "q3", "prediction": "an apple", "answers": ["Apple", "pear"]},
               {"qid": "q4", "prediction": "", "answers": ["x"]}]
    for r in records:
        run.add_sample(r)
    run.finish({"name": "x/qa"}, {"n": 4}, {"method": "filco"}, {"git_commit": "abc"})
    assert rescore.ANSWER_METRICS["em_filco_code"].native == "filco_code"
    assert "filco_code" in rescore.NORMALIZATIONS
    spec = rescore.Spec.of(["em_filco_code", "f1_char_filco_code"], None)
    (out,) = rescore.rescore(tmp_path, "x/qa", spec)
    # q1 "beatles." vs "beatles": EM 0, chars P 7/8 R 1 -> 14/15; q2 "paris, france" (13
    # chars, 5 shared) vs "paris": 5/9; q3 "apple": 1 and 1; q4 empty: 0 and 0
    assert out.metrics["em_filco_code"] == 0.25
    assert out.metrics["f1_char_filco_code"] == pytest.approx((14 / 15 + 5 / 9 + 1) / 4,
                                                              abs=1e-15)
    (target,) = experiment_runs(tmp_path, "rescored/x/qa")
    rescored = read_records(target.dir / "samples.jsonl", finished=True)
    assert [r["em_filco_code"] for r in rescored] == [0.0, 0.0, 1.0, 0.0]


# -- finish reasons ------------------------------------------------------------------------
def test_key_closed_is_declared_by_riches_not_the_core():
    assert "key_closed" not in (REPO_ROOT / "ragrepro" / "generation.py").read_text()
    assert [r.name for r in riches.profile.PROFILE.finish_reasons] == ["key_closed"]
    assert generation.finish_reasons() == ("eos", "stop", "key_closed", "length")
    assert generation.finish_reasons(()) == ("eos", "stop", "length")
    assert [r.normal for r in generation.declared_finish_reasons()] == [True, True, True, False]


def test_a_riches_run_with_key_closed_gets_the_same_rates_and_flags():
    finishes = ["key_closed", "key_closed", "length", "eos"]
    samples = [{"generation": {"answer": generation.record(f, 10, 4, prediction="x")}}
               for f in finishes]
    cols = generation.summarize(samples)
    assert list(cols)[:4] == ["gen_answer_eos", "gen_answer_stop", "gen_answer_key_closed",
                              "gen_answer_length"]
    assert (cols["gen_answer_key_closed"], cols["gen_answer_length"],
            cols["gen_answer_eos"], cols["gen_answer_stop"]) == (0.5, 0.25, 0.25, 0.0)
    assert fl.flags_text(cols) == "length 25%"
    # a record of a reason no installed method declares is refused, naming where it goes
    with pytest.raises(ValueError, match="declares its own in its profile's finish_reasons"):
        generation.record("closed_key", 1, 1)
    assert "gen_answer_key_closed" not in generation.summarize(samples, reasons=("eos",))


# -- evaluation sizes ----------------------------------------------------------------------
def test_the_papers_split_sizes_live_in_the_methods():
    source = (REPO_ROOT / "ragrepro" / "methods.py").read_text(encoding="utf-8")
    for name in OLD_EVAL_SIZE:
        assert f'"{name}"' not in source, name
    assert {n: eval_size(n) for n in OLD_EVAL_SIZE} == OLD_EVAL_SIZE
    assert eval_size("vital-qa") == 0 and eval_size(None) == 0
    assert ralm.profile.PROFILE.planner.eval_sizes["wikitext-103"] == 245_569


def test_methods_that_disagree_on_a_size_are_refused():
    wrong = MethodProfile("x", ("x",), planner=PlannerHooks(eval_sizes={"nq-open": 3_611}))
    with pytest.raises(ConfigError, match="disagree on the evaluation size of nq-open"):
        eval_size("nq-open", (filco.profile.PROFILE, wrong))


# -- report YAML ---------------------------------------------------------------------------
def test_filcos_ctx_empty_flag_comes_from_its_profile():
    text = (CONF_DIR / "report" / "flags.yaml").read_text(encoding="utf-8")
    assert "diag_ctx_empty" not in text
    rules = fl.load_rules()
    assert [r.name for r in rules] == ["length", "empty", "truncated", "ctx_empty"]
    row = {"gen_answer_length": 0.0, "diag_ctx_empty": 0.35}
    assert fl.flags_text(row) == "ctx_empty 35%"
    core_only = fl.load_rules(profiles=())
    assert fl.flags_text(row, core_only) == ""
    with pytest.raises(ConfigError, match="give a share in"):
        methods.FlagDecl("x", "diag_x", 20, "")


# One record of each pipeline, with the fields each writes: what `ragrepro samples` shows of
# them is what it showed with the single YAML list before.
RECORDS = {
    "ralm_qa": {"qid": "q1", "question": "who?", "prompt": "p", "output": "The B\nx",
                "prediction": "The B", "answers": ["B"], "doc_titles": ["T1", "T2"],
                "em": 0.0, "generation": {"answer": {"finish": "eos"}}},
    "ralm_window": {"text": 2, "window": 5, "query": "q text", "doc_title": "D", "nll_sum": 1},
    "riches": {"qid": "r1", "question": "q?", "prediction": "a", "answers": ["a"],
               "evidence": "E", "retrieved_titles": ["T"], "em_squad": 1.0, "f1_squad": 1.0,
               "score": -3.5, "output": "«key» a"},
    "filco": {"qid": "f1", "setting": "psg", "question": "q", "context": "C", "answers": ["y"],
              "raw_output": "y.", "prediction": "y", "score": 0.0,
              "generation": {"answer": {"finish": "length"}}},
}
OLD_FIELDS = {
    "id": ("qid", "id", "idx", "window"), "group": ("setting", "text"),
    "question": ("question", "query"), "prompt": ("prompt",),
    "output": ("output", "raw_output", "generation"), "answer": ("prediction",),
    "gold": ("answers", "gold", "target"),
    "evidence": ("evidence", "context", "doc_titles", "retrieved_titles", "doc_title"),
    "score": ("em", "em_squad", "score", "accuracy", "f1_squad"), "finish": ("finish",)}


def test_sample_fields_come_from_the_profiles_and_show_the_same():
    new = sv.load_view_config()
    old = sv.ViewConfig(OLD_FIELDS, new.correct_at, new.prompt_tail, new.max_chars)
    for role in sv.ROLES:
        assert set(new.fields[role]) == set(OLD_FIELDS[role]), role
    for name, rec in RECORDS.items():
        assert sv.format_sample(rec, new) == sv.format_sample(rec, old), name
        assert sv.is_wrong(rec, new) == sv.is_wrong(rec, old), name
    core = yaml.safe_load((CONF_DIR / "report" / "samples.yaml").read_text(encoding="utf-8"))
    moved = {n for p in (ralm.profile, riches.profile, filco.profile)
             for names in p.PROFILE.sample_fields.values() for n in names}
    assert moved == {"window", "text", "query", "doc_titles", "doc_title", "em", "evidence",
                     "retrieved_titles", "setting", "raw_output", "context", "score"}
    assert not moved & {n for names in core["fields"].values() for n in names}


def test_dashboard_columns_come_from_the_profiles_in_the_old_order():
    from ragrepro.report.dashboard import _setting_columns

    assert load_dashboard_spec()["sweep_settings"] == ["retriever"]

    class Run_:  # every setting recorded
        def get(self, key):
            return 1

    old = ["retriever", "rerank", "stride", "retrieval_stride", "query_len", "k", "num_docs",
           "top_k", "measure", "context", "key_type", "beam_size"]
    got = _setting_columns([Run_()])[7:]
    assert set(got) == set(old)
    # runs of RALM and RICHES (the committed ones) keep the old column order exactly
    ralm_riches = [c for c in old if c not in ("top_k", "measure", "context")]
    assert [c for c in got if c in ralm_riches] == ralm_riches


# -- the profile's two halves --------------------------------------------------------------
def test_the_profile_holds_a_planner_and_a_rehearsal_half():
    names = {f.name for f in dataclasses.fields(MethodProfile)}
    rehearsal = {f.name for f in dataclasses.fields(RehearsalHooks)}
    planner = {f.name for f in dataclasses.fields(PlannerHooks)}
    assert rehearsal == {"generation_keys", "training_caps", "fixture_locations", "coverage",
                         "fixture_titles", "write_fixtures"}
    assert planner == {"plan", "untimed_training", "eval_sizes"}
    assert not names & (rehearsal | planner) and {"planner", "rehearsal"} <= names
    assert ralm.profile.PROFILE.rehearsal.coverage is ralm.profile.coverage
    assert filco.profile.PROFILE.planner.untimed_training == "FilCo"
    assert riches.profile.PROFILE.rehearsal.generation_keys[0] == "riches.max_new_tokens"


def test_a_profile_with_a_loose_hook_mapping_is_refused_naming_the_fix(monkeypatch, tmp_path):
    mod = tmp_path / "looseprofile.py"
    mod.write_text("from ragrepro.methods import MethodProfile\n"
                   "PROFILE = MethodProfile('loose', ('loose',), planner={'plan': None})\n",
                   encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"planner= is a dict.*planner=PlannerHooks\(\.\.\.\)"):
        profiles_from([EntryPoint("loose", "looseprofile:PROFILE", "ragrepro.methods")])


def test_no_file_outside_tests_uses_the_old_flat_hooks():
    flat = ("profile.generation_keys", "profile.training_caps", "profile.fixture_locations",
            "profile.coverage", "profile.fixture_titles", "profile.write_fixtures",
            "profile.plan(", "profile.untimed_training", "p.generation_keys",
            "p.untimed_training", "p.fixture_titles")
    for folder in ("ragrepro", "ralm", "riches", "filco", "scripts"):
        for path in (REPO_ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert not [f for f in flat if f in text], path
    assert Path(REPO_ROOT / "docs" / "extending.md").read_text().count("PlannerHooks(") >= 1
