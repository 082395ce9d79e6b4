"""Decoding never waits on an optional judge (issue 22, item 8): a run whose judge is not
installed records why and leaves the attribution columns empty; `ragrepro judge` fills them
in later from the recorded samples, with the recorded judge or one named explicitly."""
from __future__ import annotations

import json
import logging

import pytest
from hydra.utils import instantiate
from riches_fakes import riches_config

from ragrepro import ladder
from ragrepro.errors import ConfigError
from ragrepro.metrics import judging
from ragrepro.tracking import Run, read_csv
from riches.attribution import attribution, warn_if_missing

SAMPLES = [{"qid": "q1", "question": "What is the capital of France?", "prediction": "Paris",
            "evidence": "Paris is the capital and largest city of France."},
           {"qid": "q2", "question": "Who wrote Hamlet?", "prediction": "",
            "evidence": "Hamlet is a tragedy."}]


def _pending_run(tmp_path, monkeypatch) -> Run:
    """A finished run whose default judge (Qwen-1.5B, opt-in weights) was missing."""
    monkeypatch.setattr(ladder, "installed", lambda name: False)
    s = instantiate(riches_config().riches, _convert_="object")
    run = Run("riches/main", "r1", tmp_path)
    run.start()
    for sample in SAMPLES:
        run.add_sample(sample)
    metrics, row = attribution(run, s.autoais, None, SAMPLES)  # the judge is never built
    config = {"model": {"_target_": "ragrepro.models.load_lm", "name": "smollm2-135m",
                        "source": "embedded:smollm2", "add_bos": False, "dtype": "float32",
                        "device": "cpu"}, "dtype": "float32", "device": "cpu"}
    run.finish(config, {"f1_squad": 0.5, **metrics}, {"riches_method": "riches", **row}, {})
    return run


def test_a_missing_judge_leaves_the_columns_empty_and_says_why(tmp_path, monkeypatch,
                                                               caplog) -> None:
    run = _pending_run(tmp_path, monkeypatch)
    data = json.loads((run.final_dir / "metrics.json").read_text())
    assert data["metrics"] == {"f1_squad": 0.5}                 # no attribution number
    status = data["settings"]["autoais_status"]
    assert status.startswith("judge qwen2.5-coder-1.5b not installed: run make setup-ladder, "
                             "then ragrepro judge riches/main")
    (row,) = read_csv(run.csv_path)
    assert row["autoais_status"] == status and "autoais_substitute" not in row
    spec = json.loads((run.final_dir / judging.JUDGE_FILE).read_text())
    assert spec["status"] == judging.PENDING
    assert spec["options"]["judge_model"]["source"] == "embedded:qwen2.5-coder-1.5b"
    assert spec["options"]["judge_threshold"] == 0.8706
    with caplog.at_level(logging.WARNING):                       # said at the start too
        warn_if_missing(instantiate(riches_config().riches, _convert_="object").autoais, "x")
    assert "not installed" in caplog.text and "ragrepro judge x" in caplog.text


def test_ragrepro_judge_refuses_to_swap_in_another_judge_silently(tmp_path, monkeypatch) -> None:
    run = _pending_run(tmp_path, monkeypatch)
    with pytest.raises(ConfigError, match="qwen2.5-coder-1.5b not installed.*judge_model="):
        judging.judge_experiment(["riches/main", f"results_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="unknown argument"):
        judging.judge_experiment(["riches/main", "judge=smollm2-135m"])
    assert json.loads((run.final_dir / judging.JUDGE_FILE).read_text())["status"] == "pending"


@pytest.mark.slow
def test_ragrepro_judge_fills_the_columns_from_the_samples(tmp_path, monkeypatch, smollm) -> None:
    from ragrepro.metrics.autoais import AttributionItem, load_autoais

    run = _pending_run(tmp_path, monkeypatch)
    judging.judge_experiment(["riches/main", "judge_model=smollm2-135m", "judge_threshold=null",
                              f"results_dir={tmp_path}"])
    data = json.loads((run.final_dir / "metrics.json").read_text())
    # the same judge built by hand over the same (question, answer, evidence) items
    expect = load_autoais(backend="llm-judge", lm=smollm, passage_format="text").evaluate(
        [AttributionItem(s["question"], s["prediction"], None, s["evidence"]) for s in SAMPLES])
    assert data["metrics"]["autoais_substitute"] == expect.metrics["autoais_substitute"]
    assert data["metrics"]["f1_squad"] == 0.5                   # everything else kept
    settings = data["settings"]
    assert settings["autoais_scorer"] == "llm-judge:smollm2-135m"  # the row names its judge
    assert settings["autoais_status"] == "judged later (ragrepro judge)"
    assert settings["autoais_threshold"] == 0.5                 # judge_threshold=null
    (row,) = read_csv(run.csv_path)
    assert float(row["autoais_substitute"]) == expect.metrics["autoais_substitute"]
    assert row["autoais_scorer"] == "llm-judge:smollm2-135m"
    lines = [json.loads(x) for x in (run.final_dir / "autoais.jsonl").read_text().splitlines()]
    assert [x["qid"] for x in lines] == ["q1", "q2"] and lines[1]["missing"] == "answer"
    assert json.loads((run.final_dir / judging.JUDGE_FILE).read_text())["status"] == "judged"
    before = (run.final_dir / "metrics.json").read_text()
    judging.judge_experiment(["riches/main", f"results_dir={tmp_path}"])  # nothing pending
    assert (run.final_dir / "metrics.json").read_text() == before
