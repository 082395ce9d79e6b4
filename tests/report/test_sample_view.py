"""`ragrepro samples`: a run's samples read in a terminal, on a tmp results tree of
hand-made records in the three pipelines' shapes (RALM QA, FilCo, RICHES, RALM windows)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragrepro.attest import attestation
from ragrepro.errors import ConfigError
from ragrepro.generation import record
from ragrepro.report import sample_view as sv
from ragrepro.tracking import Run

QA = [
    {"qid": "q1", "question": "Who wrote Hamlet", "answers": ["William Shakespeare"],
     "prompt": "Doc 0\n\nHamlet is a play.\n\nBased on this text, answer these questions:\n"
               "Q: who wrote Hamlet?\nA:", "output": " William Shakespeare\nQ: next",
     "prediction": " William Shakespeare", "doc_titles": ["Hamlet", "Play"], "em": 1.0,
     "generation": {"answer": record("stop", 40, 10, prediction=" William Shakespeare")}},
    {"qid": "q2", "question": "Capital of France?", "answers": ["Paris"], "prompt": "p2",
     "output": " The capital city of France is", "prediction": " The capital city of France is",
     "doc_titles": ["France"], "em": 0.0,
     "generation": {"answer": record("length", 12, 10, prediction="x")}},
    {"qid": "q3", "question": "Largest planet?", "answers": ["Jupiter"], "prompt": "p3",
     "output": "\nQ: next", "prediction": "", "doc_titles": [], "em": 0.0,
     "generation": {"answer": record("stop", 12, 3, prediction="")}},
]
FILCO = [{"setting": "filco", "qid": "f1", "question": "Who painted the Mona Lisa?",
          "answers": ["Leonardo da Vinci"], "context": "", "raw_output": "Michelangelo",
          "prediction": "Michelangelo", "score": 0.0}]
RICHES_OLD = [{"qid": "r1", "question": "q?", "answers": ["a"], "generation": "« key » Answer: a",
               "finish": "length", "prediction": "a", "evidence": "key", "f1_squad": 1.0}]


def _run(root: Path, exp: str, run_id: str, samples: list[dict], settings: dict) -> None:
    run = Run(exp, run_id, root)
    run.start()
    for s in samples:
        run.add_sample(s)
    run.finish({"name": exp, "qa": {"num_docs": settings.get("num_docs")}}, {"em": 0.3},
               settings, {"git_commit": "abc"})


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    r = tmp_path_factory.mktemp("results")
    _run(r, "ralm/table4", "aaa111", QA, {"model": "smollm2-135m", "num_docs": 1})
    _run(r, "ralm/table4", "bbb222", QA[:1], {"model": "gemma3-270m", "num_docs": 1})
    _run(r, "filco/fig4", "ccc333", FILCO, {"model": "smollm2-135m", "setting": "filco"})
    _run(r, "riches/main", "ddd444", RICHES_OLD, {"model": "smollm2-135m"})
    return r


CFG = sv.load_view_config()


def test_one_qa_sample_shows_prompt_tail_output_answer_gold_evidence_finish() -> None:
    lines = sv.format_sample(QA[0], CFG)
    assert lines[0] == "#q1  finish answer=stop  right (1)"
    assert lines[1] == ("  prompt…  Doc 0⏎⏎Hamlet is a play.⏎⏎Based on this text, answer "
                        "these questions:⏎Q: who wrote Hamlet?⏎A:")
    assert lines[2:] == ["  output    William Shakespeare⏎Q: next",
                         "  answer    William Shakespeare",
                         "  gold     William Shakespeare",
                         "  evidence Hamlet | Play"]


def test_other_pipelines_fields_are_found_from_the_yaml_lists() -> None:
    filco = sv.format_sample(FILCO[0], CFG)
    assert filco[0] == "#f1  [filco]  wrong (0)"
    assert "  question Who painted the Mona Lisa?" in filco
    assert "  output   Michelangelo" in filco
    assert not any(x.startswith("  evidence") for x in filco)  # an empty context
    old = sv.format_sample(RICHES_OLD[0], CFG)
    # an old record keeps its text under `generation` and its reason under `finish`
    assert old[0] == "#r1  finish length  right (1)"
    assert "  output   « key » Answer: a" in old


def test_filters_finish_empty_wrong() -> None:
    pick = [lambda f: [r["qid"] for r in QA if sv.matches(r, CFG, f)]][0]
    assert pick(sv.Filters(finish="length")) == ["q2"]
    assert pick(sv.Filters(empty=True)) == ["q3"]
    assert pick(sv.Filters(wrong=True)) == ["q2", "q3"]
    assert pick(sv.Filters(finish="stop", wrong=True)) == ["q3"]
    assert sv.is_empty(FILCO[0], CFG) is False and sv.is_wrong({"x": 1}, CFG) is None


def test_long_fields_are_cut_and_say_how_much() -> None:
    cfg = sv.ViewConfig(CFG.fields, prompt_tail=10, max_chars=5)
    lines = sv.format_sample({"qid": "z", "prompt": "a" * 30 + "Q: end?", "output": "b" * 12}, cfg)
    assert lines[1] == "  prompt…  …(27 chars) aaaQ: end?"
    assert lines[2] == "  output   bbbbb …(7 chars)"


def test_render_filters_runs_by_settings_and_prefix(root: Path) -> None:
    text, shown = sv.render(root, "ralm/table4", {"model": "smollm2-135m"},
                            sv.Filters(finish="length"))
    assert shown == 1
    assert text.splitlines()[0] == (f"== ralm/table4/aaa111  model=smollm2-135m attestation="
                                    f"{attestation(QA)}  (1 shown of 1 matching, 3 samples)")
    _, shown = sv.render(root, "ralm/table4", {}, sv.Filters(limit=2))
    assert shown == 3  # 2 of aaa111, 1 of bbb222
    text, shown = sv.render(root, "ralm/table4", {"qa.num_docs": "1"}, sv.Filters(), "bbb")
    assert shown == 1 and "bbb222" in text and "aaa111" not in text


def test_unknown_experiment_or_setting_is_a_clear_error(root: Path) -> None:
    with pytest.raises(ConfigError, match="Experiments with runs: filco/fig4, ralm/table4"):
        sv.render(root, "ralm/table9", {}, sv.Filters())
    with pytest.raises(ConfigError, match="records the setting 'methd'; filter on one of"):
        sv.render(root, "ralm/table4", {"methd": "x"}, sv.Filters())


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragrepro.cli", "samples", *args,
                           "--results", str(root)], check=False, capture_output=True,
                          text=True, timeout=120)


def test_cli_exit_codes(root: Path) -> None:
    ok = _cli(root, "ralm/table4", "--empty")
    assert ok.returncode == 0, ok.stderr
    assert "#q3" in ok.stdout and "EMPTY" in ok.stdout and "#q1" not in ok.stdout
    none = _cli(root, "filco/fig4", "--finish", "length")
    assert none.returncode == 1 and "no sample matches" in none.stderr
    bad = _cli(root, "ralm/nope")
    assert bad.returncode == 2 and "No finished run of experiment 'ralm/nope'" in bad.stderr
    assert _cli(root, "ralm/table4", "--finish", "lenght").returncode == 2
    assert _cli(root, "ralm/table4", "model").returncode == 2
