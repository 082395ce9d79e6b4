"""A real Ray head on 127.0.0.1 for the launcher tests (imported by name, like
launcher_helpers): started on private ports in a private folder, and stopped and waited for,
so that neither a Ray still stopping nor another one on the machine can break the next."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from launcher_helpers import (
    RAY_LOOPBACK,
    VENV_BIN,
    claim,
    free_ports,
    group_members,
    stale_folders,
    start_time,
    wait_gone,
)

from ragrepro.paths import REPO_ROOT

# Every port Ray would otherwise take at a fixed default, and the ones it draws itself, are
# given explicitly: a second Ray on the machine (another session, or one still stopping)
# holding 10001 makes `ray start --block` exit ("ray_client_server [exit code=1] ... Remaining
# processes will be killed"), and every test using the head then errors at set-up.
RAY_PORT_FLAGS = ("port", "node-manager-port", "object-manager-port", "ray-client-server-port",
                  "dashboard-agent-listen-port", "dashboard-agent-grpc-port",
                  "runtime-env-agent-port", "metrics-export-port")
RAY_PORT_ENV = ("AUTOSCALER_METRIC_PORT", "DASHBOARD_METRIC_PORT")  # 44217, 44227 by default
RAY_UP_SECONDS = 240  # a loaded 2-core machine takes 15-25 s; 90 s was once not enough


def ray_command(ray: Path, temp: str, ports: list[int]) -> list[str]:
    flags = [f"--{name}={p}" for name, p in zip(RAY_PORT_FLAGS, ports)]
    return [str(ray), "start", "--head", "--block", "--node-ip-address=127.0.0.1", *flags,
            "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
            "--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={temp}"]


@contextlib.contextmanager
def ray_head_running() -> Iterator[str]:
    """`ray start --head --block` on 127.0.0.1 with 2 CPUs, on ports of its own and in a temp
    folder of its own; yields its address; stopped (and waited for) on exit."""
    ray = VENV_BIN / "ray"
    assert ray.exists(), "ray is not installed: run `make setup-cluster`"
    _reap_stale_ray()
    ports = free_ports(len(RAY_PORT_FLAGS) + len(RAY_PORT_ENV))
    temp = tempfile.mkdtemp(prefix="rr-ray-")  # short: Ray's socket paths have a length limit
    claim(Path(temp))
    env = {**os.environ, **RAY_LOOPBACK, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1",
           **{k: str(p) for k, p in zip(RAY_PORT_ENV, ports[len(RAY_PORT_FLAGS):])}}
    log = open(Path(temp) / "head.log", "w")  # noqa: SIM115 - open while the head runs
    proc = subprocess.Popen(ray_command(ray, temp, ports), stdout=log, stderr=subprocess.STDOUT,
                            env=env, cwd=REPO_ROOT, start_new_session=True)
    (Path(temp) / "head.pgid").write_text(f"{proc.pid} {start_time(proc.pid)}")
    address = f"127.0.0.1:{ports[0]}"
    try:
        _wait_for_ray(ray, address, env, proc, Path(temp))
        yield address
    finally:
        _stop_ray(proc)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _reap_stale_ray() -> None:
    """Stop the Ray of a session that died without its teardown, and drop its folder."""
    for folder in stale_folders("rr-ray-"):
        with contextlib.suppress(OSError, ValueError):
            pgid, started = (folder / "head.pgid").read_text().split()
            if _same_group(int(pgid), started):
                os.killpg(int(pgid), signal.SIGKILL)
                wait_gone(int(pgid), 15)
        shutil.rmtree(folder, ignore_errors=True)


def _same_group(pgid: int, started: str) -> bool:
    """Is the process group `pgid` still that head's? Linux reuses no pid while a process
    group of that number has members, so with the leader gone, live members are its own; a
    live leader must have the recorded start time."""
    if not group_members(pgid):
        return False
    leader = start_time(pgid)
    return leader is None or leader == started


def _wait_for_ray(ray: Path, address: str, env: dict, proc: subprocess.Popen, temp: Path,
                  seconds: float = RAY_UP_SECONDS) -> None:
    """Up = the head printed its start message and `ray status` shows both CPUs. The log is
    polled first because each `ray status` is a Python start-up that loads the machine."""
    deadline = time.monotonic() + seconds
    head_log = temp / "head.log"
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"ray head exited (code {proc.returncode}):\n{_ray_logs(temp)}"
        if "Ray runtime started" in head_log.read_text(errors="replace"):
            probe = subprocess.run([str(ray), "status", f"--address={address}"],
                                   capture_output=True, text=True, env=env, check=False)
            if probe.returncode == 0 and "2.0 CPU" in probe.stdout:
                return
            time.sleep(1)
        time.sleep(0.5)
    raise AssertionError(f"ray head not up after {seconds:.0f}s:\n{_ray_logs(temp)}")


def _ray_logs(temp: Path, chars: int = 1500) -> str:
    """The head's output and the session's error logs, for a failure message."""
    files = [temp / "head.log", *sorted(temp.glob("session_*/logs/*.err")),
             *sorted(temp.glob("session_*/logs/raylet.out"))]
    parts = []
    for f in files:
        text = f.read_text(errors="replace").strip() if f.is_file() else ""
        if text:
            parts.append(f"--- {f.name}\n{text[-chars:]}")
    return "\n".join(parts) or "(no log written)"


def _stop_ray(proc: subprocess.Popen) -> None:
    """SIGTERM to the head alone: it drains and stops the processes it started (about 3 s).
    (SIGTERM to the whole group at once killed the GCS under the head, which then waited its
    full 30 s drain.) Then wait, bounded, until no process of the group is left, so that the
    next session never starts beside a Ray that is still stopping."""
    if proc.poll() is None:
        proc.terminate()
    left = wait_gone(proc.pid, 45)
    if left:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        left = wait_gone(proc.pid, 15)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    assert not left, f"Ray processes {left} survived SIGKILL for 15 s"
