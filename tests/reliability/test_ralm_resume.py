"""Issue 8 guarantee 1 on a real pipeline: an In-Context RALM sweep (SmolLM2, no retrieval)
killed with SIGKILL in the middle of its second run resumes from the last recorded window and
ends with the same metrics and per-window records as an uninterrupted sweep."""
import os
import signal

import pytest
import warm_cli

from ragrepro.paths import REPO_ROOT
from ragrepro.tracking import read_csv

pytestmark = pytest.mark.slow

# Two runs over the first 2 held-out articles (about 200 tokens), L=128, strides 8 and 16.
SWEEP = ["-m", "experiment=ralm/table1", "model=smollm2-135m", "ralm/rerank=none",
         "limit=2", "ralm.max_length=128", "ralm.stride=8,16", "wandb.mode=disabled"]


def _cli(results, **env):
    full = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled",
            "OMP_NUM_THREADS": "1", **env}
    return warm_cli.run([*SWEEP], env=full, cwd=REPO_ROOT, timeout=600)


def _rows(results):
    return {r["stride"]: r for r in read_csv(results / "ralm" / "table1.csv")}


def test_killed_ralm_sweep_resumes_from_its_last_window(tmp_path):
    clean = tmp_path / "clean"
    assert _cli(clean).returncode == 0
    expected = _rows(clean)
    first = clean / "ralm" / "table1" / expected["8"]["run_id"] / "samples.jsonl"
    n_first = len(first.read_text().splitlines())
    second = clean / "ralm" / "table1" / expected["16"]["run_id"] / "samples.jsonl"
    assert len(second.read_text().splitlines()) >= 4
    killed = tmp_path / "killed"
    # die after the 3rd window of the second run
    fault = {"RAGREPRO_FAULT": f"kill_after_samples={n_first + 3}",
             "RAGREPRO_FAULT_ONCE": str(tmp_path / "fired")}
    assert _cli(killed, **fault).returncode == -signal.SIGKILL
    partial = list((killed / "ralm" / "table1").glob("tmp_*/samples.jsonl"))
    assert len(partial) == 1 and len(partial[0].read_text().splitlines()) == 3
    again = _cli(killed, **fault)
    assert again.returncode == 0, again.stderr[-2000:]
    log = again.stdout + again.stderr
    assert "already finished" in log and "Resuming: 3 windows already scored" in log
    got = _rows(killed)
    assert sorted(got) == sorted(expected) == ["16", "8"]
    for stride, row in expected.items():
        assert got[stride]["ppl_word"] == row["ppl_word"]
        assert got[stride]["ppl_token"] == row["ppl_token"]
        a = clean / "ralm" / "table1" / row["run_id"] / "samples.jsonl"
        b = killed / "ralm" / "table1" / got[stride]["run_id"] / "samples.jsonl"
        assert a.read_text() == b.read_text()
