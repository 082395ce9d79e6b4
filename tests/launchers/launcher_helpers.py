"""Helpers shared by the launcher tests (imported by name: tests/ has no packages)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from ragrepro.paths import REPO_ROOT

VENV_BIN = Path(sys.executable).parent
# Ray would otherwise advertise the machine's network address; one machine needs loopback.
RAY_LOOPBACK = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(results: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled",
           "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO_ROOT), **RAY_LOOPBACK, **extra}
    env.pop("RAGREPRO_FAULT", None)
    return {**env, **extra}


def ragrepro(args: list[str], env: dict[str, str], timeout: int = 300):
    return subprocess.run([sys.executable, "-m", "ragrepro", *args], capture_output=True,
                          text=True, env=env, cwd=REPO_ROOT, timeout=timeout, check=False)


def free_port_pair() -> int:
    """A port p with p+1 also free (slurmctld and slurmd)."""
    for _ in range(50):
        p = free_port()
        if p < 65000:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p + 1))
                    return p
                except OSError:
                    continue
    raise AssertionError("no two adjacent free ports on 127.0.0.1")
