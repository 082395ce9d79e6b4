"""Issue 28 items 2, 3, 6: one writer per run folder (ragrepro/runlock.py), run files that
honour the umask, and a read-only results folder refused (or a folder that turns read-only
mid-run reported) with a message, not a traceback.

The CLI tests run `python -m ragrepro experiment=core/smoke` (no model) in subprocesses.
Root ignores permission bits, so the read-only tests run the CLI without the capabilities
that let root write anyway (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER; `setpriv`
drops them from the bounding set, which an exec'd root process keeps): the kernel then
refuses the writes with a real EACCES, as it would for a user without write permission."""
from __future__ import annotations

import json
import logging
import multiprocessing
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
import warm_cli

from ragrepro import io as rio
from ragrepro import runlock
from ragrepro.errors import ConfigError, RagreproError
from ragrepro.paths import REPO_ROOT
from ragrepro.runlock import WriterLock, WriterSettings
from ragrepro.tracking import read_csv

HOST = socket.gethostname()
CMD = ["experiment=core/smoke", "seed=1", "wandb.mode=disabled", "allow_code_change=true"]
N_EXAMPLES = 2  # core/smoke scores two fixed predictions
EM, F1 = 0.5, (1 + 2 / 3) / 2  # "the Beatles" exact; "Paris, France" vs "Paris": F1 2/3
SKIP = "is being written by"
NO_WRITE_CAPS = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def _lock(path, clock=time.time, **settings) -> WriterLock:
    return WriterLock(path, "x/t/r1", WriterSettings(**settings), command="test", clock=clock)


def _plant(path: Path, host: str, pid: int, beat: float, **extra) -> None:
    """A lock file as another process would have left it; its mtime is the heartbeat's."""
    record = {"host": host, "pid": pid, "pid_start": None, "started_at": _iso(beat - 60),
              "heartbeat_at": _iso(beat), "run_id": "x/t/r1", "command": "ragrepro ...",
              **extra}
    path.write_text(json.dumps(record) + "\n")
    os.utime(path, (beat, beat))


def _record(path: Path) -> dict:
    return json.loads(path.read_text())


# -- the lock itself ------------------------------------------------------------------------
def test_acquire_writes_the_record_and_release_removes_it(tmp_path):
    path = tmp_path / "r1.writer"
    lock = _lock(path)
    assert lock.acquire() is None
    rec = _record(path)
    assert set(rec) == {"host", "pid", "pid_start", "started_at", "heartbeat_at", "run_id",
                        "command"}
    assert (rec["host"], rec["pid"], rec["run_id"], rec["command"]) == (
        HOST, os.getpid(), "x/t/r1", "test")
    assert rec["started_at"] == rec["heartbeat_at"]
    assert [p.name for p in tmp_path.iterdir()] == ["r1.writer"]  # no temporary left
    lock.release()
    assert list(tmp_path.iterdir()) == []
    lock.release()  # twice is harmless


def test_second_acquire_is_refused_and_names_the_holder(tmp_path):
    path = tmp_path / "r1.writer"
    first = _lock(path)
    assert first.acquire() is None
    before = path.read_bytes()
    holder = _lock(path).acquire()
    assert holder is not None and holder.pid == os.getpid() and holder.host == HOST
    assert holder.describe() == f"host {HOST} pid {os.getpid()} since " \
                                f"{_record(path)['started_at']}"
    assert path.read_bytes() == before and first.still_held()
    first.release()
    assert _lock(path).acquire() is None  # free again


def test_a_waiting_copy_gets_the_lock_when_the_holder_releases(tmp_path):
    path = tmp_path / "r1.writer"
    first = _lock(path)
    assert first.acquire() is None
    threading.Timer(0.5, first.release).start()
    waiter = _lock(path, wait_s=20)
    t0 = time.monotonic()
    assert waiter.acquire() is None
    assert 0.4 < time.monotonic() - t0 < 5  # it polled until the release, not longer
    assert _record(path)["pid"] == os.getpid() and waiter.still_held()
    waiter.release()


def test_refresh_rewrites_heartbeat_and_mtime_in_place(tmp_path):
    path = tmp_path / "r1.writer"
    clock = Clock(1_700_000_000.0)
    lock = _lock(path, clock)
    assert lock.acquire() is None
    ino = path.stat().st_ino
    os.utime(path, (1_000, 1_000))
    clock.now += 30
    lock.refresh()
    rec = _record(path)
    assert rec["heartbeat_at"] == "2023-11-14T22:13:50.000+00:00"  # 1_700_000_030
    assert rec["started_at"] == "2023-11-14T22:13:20.000+00:00"
    assert path.stat().st_mtime > 1_000 and path.stat().st_ino == ino
    lock.release()


def test_heartbeat_thread_refreshes_the_lock(tmp_path):
    path = tmp_path / "r1.writer"
    lock = _lock(path, heartbeat_s=0.05, stale_s=1)
    assert lock.acquire() is None
    first = _record(path)["heartbeat_at"]
    os.utime(path, (1_000, 1_000))
    deadline = time.monotonic() + 10
    while _record(path)["heartbeat_at"] == first and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _record(path)["heartbeat_at"] > first and path.stat().st_mtime > 1_000
    lock.release()
    assert not path.exists()


def test_foreign_lock_is_taken_over_only_after_the_stale_time(tmp_path, caplog):
    path = tmp_path / "r1.writer"
    t0 = 1_700_000_000.0
    _plant(path, "node-b", 4242, t0)
    clock = Clock(t0 + 299)  # default stale_s: 300
    holder = _lock(path, clock).acquire()
    assert holder is not None and holder.host == "node-b" and holder.pid == 4242
    assert not caplog.records
    clock.now = t0 + 301
    taker = _lock(path, clock)
    with caplog.at_level(logging.WARNING, logger="ragrepro.runlock"):
        assert taker.acquire() is None
    assert _record(path)["host"] == HOST and _record(path)["pid"] == os.getpid()
    msg = caplog.records[-1].getMessage()
    assert "Taking over run x/t/r1 from host node-b pid 4242" in msg
    assert "no sign of life for 301 s (writer.stale_s=300)" in msg
    taker.release()


def test_the_newer_of_heartbeat_and_mtime_counts(tmp_path):
    """A holder whose clock runs late writes an old heartbeat_at; the file server's mtime
    still shows it alive, so it is not taken over."""
    path = tmp_path / "r1.writer"
    t0 = 1_700_000_000.0
    _plant(path, "node-b", 4242, t0 - 1000)
    os.utime(path, (t0, t0))
    assert _lock(path, Clock(t0 + 100)).acquire() is not None
    assert _lock(path, Clock(t0 + 301)).acquire() is None


def test_unreadable_lock_is_judged_by_its_mtime(tmp_path):
    path = tmp_path / "r1.writer"
    t0 = 1_700_000_000.0
    path.write_bytes(b"\x00garbage{")
    os.utime(path, (t0, t0))
    holder = _lock(path, Clock(t0 + 10)).acquire()
    assert holder is not None and holder.describe() == "host ? pid ? since an unknown time"
    assert _lock(path, Clock(t0 + 301)).acquire() is None


def _dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    return int(child.stdout)


def test_dead_pid_on_this_host_is_taken_over_at_once(tmp_path, caplog):
    path = tmp_path / "r1.writer"
    pid = _dead_pid()
    _plant(path, HOST, pid, time.time())  # a fresh heartbeat: only the dead pid counts
    lock = _lock(path)
    with caplog.at_level(logging.WARNING, logger="ragrepro.runlock"):
        assert lock.acquire() is None
    assert f"from host {HOST} pid {pid}" in caplog.text and "its process is gone" in caplog.text
    lock.release()


def test_live_pid_on_this_host_keeps_the_lock_unless_it_is_a_reused_pid(tmp_path):
    path = tmp_path / "r1.writer"
    start = runlock._proc_stat(os.getpid())[1]
    _plant(path, HOST, os.getpid(), time.time(), pid_start=start)
    assert _lock(path).acquire() is not None
    _plant(path, HOST, os.getpid(), time.time(), pid_start=str(int(start) + 1))
    assert _lock(path).acquire() is None  # same pid, another start time: the holder is gone


def test_a_zombie_holder_counts_as_dead():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while runlock._proc_stat(child.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.05)  # exited, not reaped yet: a zombie
        assert runlock._proc_stat(child.pid)[0] == "Z"
        assert not runlock.pid_alive(child.pid)
    finally:
        child.wait()
    assert runlock.pid_alive(os.getpid()) and not runlock.pid_alive(child.pid)


def test_contenders_for_one_takeover_exactly_one_wins(tmp_path, monkeypatch):
    """Worst case: every contender has judged the stale lock before any of them acts."""
    n = 8
    real_read = runlock._read
    for round_ in range(20):
        path = tmp_path / f"r{round_}.writer"
        _plant(path, "node-b", 4242, time.time() - 1000)
        barrier = threading.Barrier(n)
        first_read: set[int] = set()

        def read_then_wait(p, barrier=barrier, first_read=first_read):
            holder = real_read(p)
            if threading.get_ident() not in first_read:
                first_read.add(threading.get_ident())
                barrier.wait(timeout=30)
            return holder

        monkeypatch.setattr(runlock, "_read", read_then_wait)
        locks = [_lock(path) for _ in range(n)]
        results: list = [None] * n

        def contend(i, locks=locks, results=results):
            results[i] = locks[i].acquire()

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        monkeypatch.setattr(runlock, "_read", real_read)
        winners = [lk for lk, r in zip(locks, results) if r is None]
        assert len(winners) == 1, results
        assert winners[0].still_held() and _record(path)["host"] == HOST
        assert all(r.host == HOST for r in results if r is not None)  # they saw the winner
        assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no guard left
        winners[0].release()


def _contend_in_process(path: str, barrier, results, hold) -> None:
    """One contender (a forked process): it reads the stale lock, waits until every other
    contender has read it too, then acts."""
    real_read, waited = runlock._read, []

    def read_then_wait(p):
        holder = real_read(p)
        if not waited:
            waited.append(True)
            barrier.wait(timeout=60)
        return holder

    runlock._read = read_then_wait
    lock = WriterLock(Path(path), "x/t/r1", WriterSettings(), command="child")
    got = lock.acquire()
    results.put((os.getpid(), got is None))
    hold.wait(timeout=60)  # the winner holds the lock until every contender has tried
    lock.release()


@pytest.mark.parametrize("round_", range(5))
def test_processes_racing_for_a_stale_lock_exactly_one_wins(tmp_path, round_):
    ctx = multiprocessing.get_context("fork")
    path = tmp_path / "r1.writer"
    _plant(path, "node-b", 4242, time.time() - 1000)
    n = 4
    barrier, results, hold = ctx.Barrier(n), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_contend_in_process, args=(str(path), barrier, results, hold))
             for _ in range(n)]
    for p in procs:
        p.start()
    try:
        got = [results.get(timeout=60) for _ in range(n)]
        winners = [pid for pid, won in got if won]
        assert len(winners) == 1 and _record(path)["pid"] == winners[0], got
    finally:
        hold.set()  # a failed check must not leave the contenders waiting
        for p in procs:
            p.join(60)
    assert [p.exitcode for p in procs] == [0] * n and not path.exists()


def test_a_holder_that_lost_its_lock_never_touches_the_new_one(tmp_path):
    path = tmp_path / "r1.writer"
    old = _lock(path)
    assert old.acquire() is None
    old._stop.set()  # its heartbeat stalls (a suspended machine)
    new = _lock(path, Clock(time.time() + 400))
    assert new.acquire() is None
    taken = path.read_bytes()
    assert not old.still_held()
    old.refresh()  # lands in the unlinked file
    assert path.read_bytes() == taken
    with pytest.raises(RagreproError, match=f"taken over by host {HOST} pid {os.getpid()}"):
        old.check_held()
    old.release()
    assert path.read_bytes() == taken and new.still_held()
    new.release()


def test_writer_settings_need_two_heartbeats_per_stale_time():
    assert WriterSettings.of(None) == WriterSettings(0.0, 30.0, 300.0)
    assert WriterSettings.of({"wait_s": 5, "heartbeat_s": 1, "stale_s": 2}).stale_s == 2
    with pytest.raises(ConfigError, match=r"writer.stale_s=40 must be at least twice "
                                          r"writer.heartbeat_s=30"):
        WriterSettings.of({"heartbeat_s": 30, "stale_s": 40})


# -- permissions ----------------------------------------------------------------------------
@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077], ids=["022", "002", "077"])
def test_atomic_writes_follow_the_umask(tmp_path, mask):
    old = os.umask(mask)
    try:
        assert rio._read_umask() == mask
        rio.atomic_write_text(tmp_path / "sub" / "a.json", "{}\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "sub" / "a.json").stat().st_mode) == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "sub").stat().st_mode) == 0o777 & ~mask


def _cli(args, results, fault=None, umask=None, unprivileged=False, **env_extra):
    env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled",
           "OMP_NUM_THREADS": "1", **env_extra}
    env.pop("RAGREPRO_FAULT", None)
    if fault:
        env["RAGREPRO_FAULT"] = fault
    if not (unprivileged and os.geteuid() == 0):
        return warm_cli.start(args, env=env, cwd=REPO_ROOT, umask=umask, merge_stderr=True)
    # dropping root's rights needs an exec'd process (setpriv), not a fork of the warm one
    assert shutil.which("setpriv"), "setpriv (util-linux) is needed to drop root's rights"
    cmd = [*NO_WRITE_CAPS, sys.executable, "-m", "ragrepro", *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, cwd=REPO_ROOT, umask=-1 if umask is None else umask)


def _run(args, results, **kw) -> tuple[int, str]:
    proc = _cli(args, results, **kw)
    out, _ = proc.communicate(timeout=300)
    return proc.returncode, out


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077], ids=["022", "002", "077"])
def test_run_files_csv_and_folders_follow_the_umask(tmp_path, mask):
    results = tmp_path / "results"
    results.mkdir()
    rc, out = _run(CMD, results, umask=mask)
    assert rc == 0, out[-3000:]
    entries = sorted((results / "core").rglob("*"))
    files = [p for p in entries if p.is_file()]
    names = {p.name for p in files}
    assert {"smoke.csv", "smoke.csv.lock", "config.json", "metrics.json", "samples.jsonl",
            "code.json"} <= names, names
    for p in entries:
        want = 0o777 & ~mask if p.is_dir() else 0o666 & ~mask
        assert stat.S_IMODE(p.stat().st_mode) == want, (p, oct(p.stat().st_mode))
    assert stat.S_IMODE((results / "core").stat().st_mode) == 0o777 & ~mask


# -- one writer per run, through the CLI ----------------------------------------------------
def _state(results):
    base = results / "core" / "smoke"
    rows = read_csv(results / "core" / "smoke.csv")
    entries = sorted(p.name for p in base.iterdir()) if base.exists() else []
    return rows, entries


def _unfinished(results) -> str:
    """The run id of the one unfinished run (its tmp_ folder)."""
    tmp = [p.name for p in (results / "core" / "smoke").glob("tmp_*")]
    assert len(tmp) == 1, tmp
    return tmp[0].removeprefix("tmp_")


def _assert_one_whole_run(results):
    """One row, one finished folder with every file whole, nothing else left behind."""
    rows, entries = _state(results)
    assert len(rows) == 1 and entries == [rows[0]["run_id"]], (rows, entries)
    run_dir = results / "core" / "smoke" / rows[0]["run_id"]
    assert {p.name for p in run_dir.iterdir()} == {"code.json", "config.json", "metrics.json",
                                                   "samples.jsonl"}
    metrics = json.loads((run_dir / "metrics.json").read_text())
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert metrics["settings"]["n_examples"] == len(samples) == N_EXAMPLES
    assert [s["idx"] for s in samples] == [0, 1]
    assert float(rows[0]["em_squad"]) == EM
    assert float(rows[0]["f1_squad"]) == pytest.approx(F1, abs=1e-12)
    assert json.loads((run_dir / "code.json").read_text())


def test_two_copies_started_together_one_computes_the_other_skips(tmp_path):
    results, release = tmp_path / "results", tmp_path / "release"
    fault = {"fault": "sleep_before_commit=240", "RAGREPRO_FAULT_RELEASE": str(release)}
    procs = [_cli(CMD, results, **fault) for _ in range(2)]
    deadline = time.monotonic() + 240
    while all(p.poll() is None for p in procs) and time.monotonic() < deadline:
        time.sleep(0.1)  # the holder sleeps until `release` exists: the other ends first
    skipper = next(p for p in procs if p.poll() is not None)
    holder = next(p for p in procs if p is not skipper)
    skipped = skipper.communicate()[0]
    assert skipper.returncode == 0, skipped[-3000:]
    assert holder.poll() is None  # still holding the run while the other skipped
    rows, entries = _state(results)
    run_id = _unfinished(results)
    assert rows == [] and entries == sorted([f"tmp_{run_id}", f"{run_id}.writer"])
    lock = _record(results / "core" / "smoke" / f"{run_id}.writer")
    assert lock["pid"] == holder.pid and lock["host"] == HOST
    assert (f"Run core/smoke/{run_id} is being written by host {HOST} pid {holder.pid} since "
            f"{lock['started_at']} (lock file {results}/core/smoke/{run_id}.writer); "
            f"skipping. Rerun later, or set writer.wait_s=<seconds> to wait.") in skipped
    assert "Finished" not in skipped and "Traceback" not in skipped
    release.touch()
    computed = holder.communicate(timeout=120)[0]
    assert holder.returncode == 0 and f"Finished core/smoke/{run_id}" in computed, computed
    _assert_one_whole_run(results)
    rc, again = _run(CMD, results)
    assert rc == 0 and "already finished" in again
    _assert_one_whole_run(results)


def test_a_copy_that_waits_finds_the_run_finished(tmp_path):
    """writer.wait_s: the second copy waits for the holder, then re-checks is_finished()."""
    results, release = tmp_path / "results", tmp_path / "release"
    fault = {"fault": "sleep_before_commit=240", "RAGREPRO_FAULT_RELEASE": str(release)}
    holder = _cli(CMD, results, **fault)
    base = results / "core" / "smoke"
    deadline = time.monotonic() + 120
    while not list(base.glob("*.writer")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(base.glob("*.writer")), "the first copy never took the lock"
    waiter = _cli([*CMD, "writer.wait_s=240"], results)
    time.sleep(3)
    assert waiter.poll() is None  # waiting, not skipping
    release.touch()
    assert holder.wait(timeout=120) == 0
    waited = waiter.communicate(timeout=120)[0]
    assert waiter.returncode == 0, waited[-3000:]
    assert "already finished" in waited and SKIP not in waited
    _assert_one_whole_run(results)


def test_sigkilled_holder_is_taken_over_by_a_rerun_on_the_same_host(tmp_path):
    results = tmp_path / "results"
    rc, killed = _run(CMD, results, fault="kill_after_samples=1")
    assert rc == -signal.SIGKILL, killed[-3000:]
    rows, entries = _state(results)
    run_id = _unfinished(results)
    assert rows == [] and entries == sorted([f"tmp_{run_id}", f"{run_id}.writer"])  # lock left
    dead = _record(results / "core" / "smoke" / f"{run_id}.writer")["pid"]
    rc, rerun = _run(CMD, results)
    assert rc == 0, rerun[-3000:]
    assert f"Taking over run core/smoke/{run_id} from host {HOST} pid {dead}" in rerun
    assert "its process is gone" in rerun
    assert f"Resuming: 1 of {N_EXAMPLES} examples already scored" in rerun
    _assert_one_whole_run(results)


def test_foreign_host_lock_is_taken_over_only_after_the_stale_time(tmp_path):
    results = tmp_path / "results"
    rc, killed = _run(CMD, results, fault="kill_after_samples=1")
    assert rc == -signal.SIGKILL, killed[-3000:]
    run_id = _unfinished(results)
    lock_file = results / "core" / "smoke" / f"{run_id}.writer"
    # the holder ran on another node: its pid says nothing here; its last heartbeat 100 s ago
    _plant(lock_file, "node-elsewhere", 4242, time.time() - 100)
    rc, out = _run(CMD, results)
    assert rc == 0 and f"Run core/smoke/{run_id} is being written by host node-elsewhere " \
                       f"pid 4242" in out, out[-3000:]
    assert _state(results)[0] == [] and lock_file.exists()  # untouched, still unfinished
    rc, out = _run([*CMD, "writer.stale_s=90", "writer.heartbeat_s=10"], results)
    assert rc == 0, out[-3000:]
    assert f"Taking over run core/smoke/{run_id} from host node-elsewhere pid 4242" in out
    assert "(writer.stale_s=90)" in out and "Resuming: 1 of 2" in out
    _assert_one_whole_run(results)


# -- read-only or full results folder -------------------------------------------------------
def _make_read_only(path: Path) -> None:
    for p in [*path.rglob("*"), path]:
        p.chmod(p.stat().st_mode & ~0o222)


def _make_writable(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        p.chmod(p.stat().st_mode | 0o200)


def test_read_only_results_folder_is_refused_at_once(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    _make_read_only(results)
    try:
        rc, out = _run(CMD, results, unprivileged=True)
    finally:
        _make_writable(results)
    assert rc == 2, out[-3000:]
    assert f"The results folder is not writable: {results} (Permission denied)" in out
    assert "results_dir=<writable path>" in out and "Traceback" not in out
    assert "Run core/smoke/" not in out  # refused before the run started
    assert list(results.iterdir()) == []


def test_finished_runs_in_a_read_only_folder_are_still_reused(tmp_path):
    results = tmp_path / "results"
    rc, out = _run(CMD, results)
    assert rc == 0, out[-3000:]
    _make_read_only(results)
    try:
        rc, out = _run(CMD, results, unprivileged=True)
    finally:
        _make_writable(results)
    assert rc == 0 and "already finished" in out, out[-3000:]
    _assert_one_whole_run(results)


def test_folder_made_read_only_mid_run_keeps_the_work_and_the_rerun_resumes(tmp_path):
    results = tmp_path / "results"
    rc, out = _run(CMD, results, fault="readonly_after_samples=1", unprivileged=True)
    run_id = _unfinished(results)
    work = results / "core" / "smoke" / f"tmp_{run_id}"
    samples = work / "samples.jsonl"
    assert rc == 2, out[-3000:]
    assert f"Could not write {samples}: Permission denied. The work so far is kept" in out
    assert "rerun the same command: it resumes" in out and "Traceback" not in out
    assert [json.loads(x)["idx"] for x in samples.read_text().splitlines()] == [0]
    assert not (results / "core" / "smoke" / f"{run_id}.writer").exists()  # released
    _make_writable(work)
    rc, out = _run(CMD, results)
    assert rc == 0 and "Resuming: 1 of 2 examples already scored" in out, out[-3000:]
    _assert_one_whole_run(results)


def test_write_errors_name_the_file(tmp_path, monkeypatch):
    """The errno mapping of ragrepro.io (EROFS as well as EACCES; ENOSPC stays disk full)."""
    import errno

    for code, words in [(errno.EROFS, "Read-only file system. The work so far is kept"),
                        (errno.EACCES, "Permission denied. The work so far is kept"),
                        (errno.ENOSPC, "disk full")]:
        def refuse(*a, code=code, **k):
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(rio.tempfile, "mkstemp", refuse)
        with pytest.raises(RagreproError, match=f"Could not write {tmp_path}/a.json: .*{words}"):
            rio.atomic_write_text(tmp_path / "a.json", "x")
        with pytest.raises(RagreproError, match="not writable" if code != errno.ENOSPC
                           else "disk full"):
            rio.check_writable([tmp_path], tmp_path)
        monkeypatch.undo()
