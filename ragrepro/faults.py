"""Fault injection for the reliability tests, driven by the environment so that the
command itself stays identical between the killed run and its rerun.

RAGREPRO_FAULT="kill_after_samples=N"  SIGKILL this process after the N-th per-sample record
                                       of a run (only once per marker file, see below)
RAGREPRO_FAULT="enospc_after_samples=N" the N+1-th record write fails with "disk full"
RAGREPRO_FAULT="kill_in_commit=N"      SIGKILL this process after step N of a run's commit
                                       (ragrepro.tracking.Run.commit: 1 = CSV row written,
                                       2 = an earlier finished folder moved aside, 3 = folder
                                       renamed, before the old one is deleted)
RAGREPRO_FAULT="kill_in_overwrite=N"   SIGKILL after step N of overwrite=true's removal of a
                                       finished run (Run.start: 1 = its CSV row dropped,
                                       2 = its folder moved aside)
RAGREPRO_FAULT="sleep_before_commit=S" sleep up to S seconds after a run's results are
                                       written, before its commit (ragrepro.runner), holding
                                       its writer lock: a second copy started meanwhile
                                       overlaps; RAGREPRO_FAULT_RELEASE=<path> ends the sleep
                                       as soon as that file exists
RAGREPRO_FAULT="readonly_after_samples=N" after the N-th record, make the run's working
                                       folder and its files read-only (chmod a-w, as its
                                       owner): the next write meets a real permission error
RAGREPRO_FAULT_ONCE=<path>             the fault fires only if this file does not exist yet,
                                       and creates it when firing (so a sweep dies once)
"""
from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path


def _spec() -> tuple[str, int] | None:
    raw = os.environ.get("RAGREPRO_FAULT", "")
    if "=" not in raw:
        return None
    kind, _, n = raw.partition("=")
    return kind.strip(), int(n)


def _armed() -> bool:
    once = os.environ.get("RAGREPRO_FAULT_ONCE")
    if not once:
        return True
    try:  # create-if-absent in one step: of parallel jobs, exactly one fires
        fd = os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write("fired\n")
    return True


_written = 0  # per-sample records written by this process, across all runs of a sweep


def before_sample_write() -> None:
    spec = _spec()
    if spec is None:
        return
    kind, n = spec
    if kind == "enospc_after_samples" and _written >= n and _armed():
        raise OSError(errno.ENOSPC, "No space left on device (injected)")


def after_sample_write(folder: Path | None = None) -> None:
    global _written
    _written += 1
    spec = _spec()
    if spec is None:
        return
    kind, n = spec
    if kind == "kill_after_samples" and _written >= n and _armed():
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "readonly_after_samples" and _written == n and folder is not None and _armed():
        _make_read_only(folder)


def _make_read_only(folder: Path) -> None:
    for path in [*folder.rglob("*"), folder]:  # the folder last: its entries stay reachable
        os.chmod(path, path.stat().st_mode & ~0o222)


def before_commit() -> None:
    """After a run's results are written, before its commit (its writer lock held)."""
    spec = _spec()
    if spec is None or spec[0] != "sleep_before_commit" or not _armed():
        return
    release = os.environ.get("RAGREPRO_FAULT_RELEASE")
    deadline = time.monotonic() + spec[1]
    while time.monotonic() < deadline and not (release and Path(release).exists()):
        time.sleep(0.1)


def _kill_at(kind: str, step: int) -> None:
    spec = _spec()
    if spec is not None and spec == (kind, step) and _armed():
        os.kill(os.getpid(), signal.SIGKILL)


def in_commit(step: int) -> None:
    """Between two steps of a run's commit: the points a real kill can fall between."""
    _kill_at("kill_in_commit", step)


def in_overwrite(step: int) -> None:
    _kill_at("kill_in_overwrite", step)
