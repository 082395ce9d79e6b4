"""tests/warm_cli.py: the suite's warm `python -m ragrepro` behaves as a fresh interpreter for
what the tests observe: the numbers and files a run writes, its environment read per command,
its own pid, exit codes (an error's 2, a SIGKILL's -9), a timeout that kills the command."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import warm_cli

from ragrepro.paths import REPO_ROOT
from ragrepro.tracking import read_csv

CMD = ["experiment=core/smoke", "seed=1", "wandb.mode=disabled", "allow_code_change=true"]
# core/smoke: "the Beatles" vs "The Beatles" exact; "Paris, France" vs "Paris" F1 2/3
EM, F1 = 0.5, (1 + 2 / 3) / 2
# fields that record when and where a run was made, not what it computed
VOLATILE = {"created_at", "finished_at", "started_at", "wall_s", "timings_s", "host", "pid",
            "metadata"}


def _env(results, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAGREPRO_FAULT", warm_cli.FRESH_ENV)}
    return {**env, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled", **extra}


def _strip(d):
    if isinstance(d, dict):
        return {k: _strip(v) for k, v in d.items() if k not in VOLATILE}
    return d


def _only_row(results) -> dict:
    (row,) = read_csv(results / "core" / "smoke.csv")
    return row


def test_warm_and_fresh_runs_write_the_same_row_metrics_and_samples(tmp_path):
    warm, fresh = tmp_path / "warm", tmp_path / "fresh"
    w = warm_cli.run(CMD, env=_env(warm), cwd=REPO_ROOT, timeout=300)
    f = subprocess.run([sys.executable, "-m", "ragrepro", *CMD], env=_env(fresh), cwd=REPO_ROOT,
                       capture_output=True, text=True, timeout=300, check=False)
    assert w.returncode == f.returncode == 0, (w.stderr[-2000:], f.stderr[-2000:])
    rw, rf = _only_row(warm), _only_row(fresh)
    assert rw["run_id"] == rf["run_id"]
    assert float(rw["em_squad"]) == EM and float(rw["f1_squad"]) == pytest.approx(F1, abs=1e-12)
    assert {k: rw[k] for k in ("em_squad", "f1_squad", "seed")} == \
           {k: rf[k] for k in ("em_squad", "f1_squad", "seed")}
    run = f"core/smoke/{rw['run_id']}"
    for name in ("samples.jsonl", "config.json"):
        assert (warm / run / name).read_text() == (fresh / run / name).read_text(), name
    mw, mf = (json.loads((p / run / "metrics.json").read_text()) for p in (warm, fresh))
    assert _strip(mw) == _strip(mf)
    # the same log line, in the same stream, as the fresh interpreter prints
    line = f"Finished {run}: em_squad=0.5, f1_squad=0.8333"
    assert (line in w.stdout) == (line in f.stdout) and (line in w.stderr) == (line in f.stderr)
    assert line in w.stdout + w.stderr


def test_each_command_reads_its_own_environment_and_is_its_own_process(tmp_path):
    """RAGREPRO_RESULTS differs per call: nothing read it when the server imported ragrepro."""
    pids = []
    for name in ("a", "b"):
        proc = warm_cli.start(CMD, env=_env(tmp_path / name), cwd=REPO_ROOT)
        pids.append(proc.pid)
        assert proc.wait(timeout=300) == 0, proc.outputs()
        assert float(_only_row(tmp_path / name)["em_squad"]) == EM
    assert len(set(pids)) == 2 and os.getpid() not in pids
    for pid in pids:  # reaped: gone, as a finished subprocess is
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_exit_codes_errors_and_a_sigkill_reach_the_caller(tmp_path):
    bad = warm_cli.run(["experiment=core/smok"], env=_env(tmp_path), cwd=REPO_ROOT, timeout=300)
    assert bad.returncode == 2 and "Unknown experiment" in bad.stderr
    assert "Traceback" not in bad.stderr
    killed = warm_cli.run(CMD, env=_env(tmp_path, RAGREPRO_FAULT="kill_after_samples=1"),
                          cwd=REPO_ROOT, timeout=300)
    assert killed.returncode == -signal.SIGKILL


def test_a_timeout_kills_the_command(tmp_path):
    env = _env(tmp_path, RAGREPRO_FAULT="sleep_before_commit=240",
               RAGREPRO_FAULT_RELEASE=str(tmp_path / "never"))
    proc = warm_cli.start(CMD, env=env, cwd=REPO_ROOT)
    assert proc.poll() is None
    with pytest.raises(subprocess.TimeoutExpired):
        proc.communicate(timeout=1)
    assert proc.returncode == -signal.SIGKILL


def test_the_switch_runs_a_fresh_interpreter(tmp_path, monkeypatch):
    monkeypatch.setenv(warm_cli.FRESH_ENV, "1")
    proc = warm_cli.start(CMD, env=_env(tmp_path), cwd=REPO_ROOT, merge_stderr=True)
    assert isinstance(proc, subprocess.Popen)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "Finished core/smoke/" in out


def test_only_sessions_that_keep_the_slow_tests_preload_the_models():
    assert warm_cli.runs_slow_tests("not exclusive")  # make test
    assert warm_cli.runs_slow_tests("")
    assert not warm_cli.runs_slow_tests(
        "not slow and not browser and not cluster and not exclusive")  # make test-fast
    assert not warm_cli.runs_slow_tests("not  slow")


def _held_command_line(results, env) -> tuple[list[str], subprocess.CompletedProcess]:
    """The command line of a smoke run held just before its commit, then the finished run."""
    release = results / "release"
    proc = warm_cli.start(CMD, env={**env, "RAGREPRO_FAULT": "sleep_before_commit=120",
                                    "RAGREPRO_FAULT_RELEASE": str(release)}, cwd=REPO_ROOT)
    deadline = time.monotonic() + 120
    while not list((results / "core" / "smoke").glob("tmp_*/samples.jsonl")):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)  # the run has started: any re-execution happened before it
    cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().split("\0")
    release.touch()
    out, err = proc.communicate(timeout=120)
    return cmdline, subprocess.CompletedProcess(cmdline, proc.returncode, out, err)


@pytest.mark.slow  # the server imports transformers and the embedded architectures
def test_a_model_preloading_server_runs_a_command_with_other_hf_settings_fresh(tmp_path,
                                                                              monkeypatch):
    """transformers reads HF_* when imported: with it preloaded, a command whose HF_* values
    differ from the server's is re-executed as `python -m ragrepro` (same pid); one with the
    server's values runs in the forked interpreter."""
    monkeypatch.setattr(warm_cli, "PRELOAD_MODELS", True)
    monkeypatch.setattr(warm_cli, "_SERVER", None)  # a server of its own, closed below
    try:
        same = _env(tmp_path / "same")
        line, done = _held_command_line(tmp_path / "same", same)
        assert done.returncode == 0, done.stderr[-2000:]
        assert any(a.endswith("warm_cli.py") for a in line) and "ragrepro" not in line
        other = _env(tmp_path / "other", HF_HUB_DISABLE_TELEMETRY="1",
                     HF_HOME=str(tmp_path / "hf"))
        line, done = _held_command_line(tmp_path / "other", other)
        assert done.returncode == 0, done.stderr[-2000:]
        assert line[1:4] == ["-m", "ragrepro", *CMD[:1]]
        assert _only_row(tmp_path / "other")["run_id"] == _only_row(tmp_path / "same")["run_id"]
    finally:
        warm_cli._server().close()
