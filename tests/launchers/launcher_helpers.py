"""Helpers shared by the launcher tests (imported by name: tests/ has no packages)."""
from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import warm_cli

from ragrepro.io import atomic_write_text, locked
from ragrepro.paths import REPO_ROOT

VENV_BIN = Path(sys.executable).parent
# Ray would otherwise advertise the machine's network address; one machine needs loopback.
RAY_LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def ephemeral_range() -> tuple[int, int]:
    """The kernel's range for the local ports of outgoing connections."""
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_ports(n: int, consecutive: bool = False) -> list[int]:
    """n distinct ports that nothing is bound to now, on any address.

    A port the kernel hands out with bind(0) lies in the ephemeral range, so any outgoing
    connection made before the daemon binds it (Ray's own, pip's, another test's) may take
    it, and the daemon then exits with "address already in use". Ports are therefore drawn
    below that range, where the kernel never assigns one by itself, away from Ray's fixed
    defaults (6379, 8265, 10001, 52365) and its client-server range (23000+). All sockets are
    held until the last port is found, so the ports differ from each other. With
    `consecutive`, the ports are p, p+1, ... (slurmctld and slurmd)."""
    lo = 24000
    hi = min(ephemeral_range()[0], 32768) - n
    rng = random.Random(os.getpid() ^ time.time_ns())
    for _ in range(200):
        start = rng.randrange(lo, hi)
        wanted = [start + i for i in range(n)] if consecutive else \
            sorted({rng.randrange(lo, hi + n) for _ in range(n)})
        if len(wanted) == n and (held := _bind_all(wanted)) is not None:
            for s in held:
                s.close()
            return wanted
    raise AssertionError(f"no {n} free ports on this machine between {lo} and {hi + n}")


def _bind_all(ports: list[int]) -> list[socket.socket] | None:
    held = []
    for p in ports:
        s = socket.socket()  # no SO_REUSEADDR: a port in TIME_WAIT counts as taken
        try:
            s.bind(("", p))
        except OSError:
            s.close()
            for h in held:
                h.close()
            return None
        held.append(s)
    return held


def free_port() -> int:
    return free_ports(1)[0]


def base_env(results: Path, **extra: str) -> dict[str, str]:
    # the one-node Slurm's job states are read at least every 2 s (one local scontrol call;
    # submitit's back-off would see a job that ended at 9 s only at about 16 s)
    env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT), "RAGREPRO_SLURM_POLL_S": "2",
           **RAY_LOOPBACK, **extra}
    env.pop("RAGREPRO_FAULT", None)
    return {**env, **extra}


def ragrepro(args: list[str], env: dict[str, str], timeout: int = 300):
    """The submitting `python -m ragrepro` (tests/warm_cli.py); its jobs start as the launcher
    starts them (fresh processes under Slurm, Ray or joblib)."""
    return warm_cli.run(args, env=env, cwd=REPO_ROOT, timeout=timeout)


def free_port_pair() -> int:
    """A port p with p+1 also free (slurmctld and slurmd)."""
    return free_ports(2, consecutive=True)[0]


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group, read from /proc. A zombie holds no
    port and no file; in a container whose init does not reap, killed daemons stay zombies."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:  # fields after the command name: state, ppid, pgrp, ...
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # the process exited while we looked
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            out.append(int(entry.name))
    return out


def wait_gone(pgid: int, seconds: float) -> list[int]:
    """Poll until no live process of the group is left (bounded); returns the survivors."""
    deadline = time.monotonic() + seconds
    while (left := group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


OWNER = "owner"  # in a fixture's private folder: "<pid> <start time>" of the pytest process


def start_time(pid: int) -> str | None:
    try:  # field 22 of /proc/<pid>/stat: start time in clock ticks since boot
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split())[19]
    except (OSError, IndexError):
        return None


def claim(folder: Path) -> None:
    """Mark a private folder as this process's (see stale_folders)."""
    (folder / OWNER).write_text(f"{os.getpid()} {start_time(os.getpid())}")


def stale_folders(prefix: str) -> list[Path]:
    """Private folders (`<tmp>/<prefix>*`) of pytest sessions that died without their
    teardown (killed, or stopped by a timeout that skips fixtures): their daemons may still
    run. A live owner, or a pid reused since (start time differs), is told apart by the start
    time; folders without an owner file are not ours to judge and are left alone."""
    out = []
    for folder in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        try:
            pid, start = (folder / OWNER).read_text().split()
        except (OSError, ValueError):
            continue
        if start_time(int(pid)) != start:
            out.append(folder)
    return out


@contextlib.contextmanager
def cache_env(path):
    """RAGREPRO_CACHE for in-process references (module-scoped fixtures cannot monkeypatch)."""
    old = os.environ.get("RAGREPRO_CACHE")
    os.environ["RAGREPRO_CACHE"] = str(path)
    try:
        yield
    finally:
        if old is None:
            del os.environ["RAGREPRO_CACHE"]
        else:
            os.environ["RAGREPRO_CACHE"] = old


def computed_once(tmp_path_factory, worker_id: str, name: str,
                  compute: Callable[[Path], dict]) -> tuple[Path, dict]:
    """`compute(folder)` run once per test session, whichever xdist worker asks first; the
    others wait on a file lock and read what it returned (saved as JSON beside the folder).
    Under xdist the workers' temp folders share a parent that is the session's own; in a
    plain run the session's folder is used, so nothing leaks from one session to the next.
    The folder is a reference: tests read it and never write into it."""
    base = tmp_path_factory.getbasetemp()
    root = base if worker_id == "master" else base.parent
    folder, saved = root / name, root / f"{name}.json"
    with locked(root / name):
        if not saved.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a compute that failed half-way
            folder.mkdir(parents=True)
            # key order kept (no sort_keys): the tests compare the CSV row's column order
            atomic_write_text(saved, json.dumps(compute(folder)))
    return folder, json.loads(saved.read_text())
