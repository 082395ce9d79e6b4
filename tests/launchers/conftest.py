"""A real Ray head and a real one-node Slurm on 127.0.0.1, started for these tests and
always stopped again. Nothing here is skipped: without `make setup-cluster` they fail loudly."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from launcher_helpers import RAY_LOOPBACK, VENV_BIN, free_port, free_port_pair

from ragrepro.paths import REPO_ROOT


@pytest.fixture(scope="session")
def ray_head():
    """`ray start --head --block` on 127.0.0.1 with 2 CPUs; SIGTERM to it stops the cluster."""
    ray = VENV_BIN / "ray"
    assert ray.exists(), "ray is not installed: run `make setup-cluster`"
    port = free_port()
    temp = tempfile.mkdtemp(prefix="rr-ray-")  # short: Ray's socket paths have a length limit
    env = {**os.environ, **RAY_LOOPBACK, "PYTHONPATH": str(REPO_ROOT), "OMP_NUM_THREADS": "1"}
    log = open(Path(temp) / "head.log", "w")  # noqa: SIM115 - open while the head runs
    proc = subprocess.Popen(
        [str(ray), "start", "--head", "--block", "--node-ip-address=127.0.0.1",
         f"--port={port}", "--num-cpus=2", "--num-gpus=0", "--include-dashboard=false",
         "--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={temp}"],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT, start_new_session=True)
    address = f"127.0.0.1:{port}"
    try:
        _wait_for_ray(ray, address, env, proc, Path(temp) / "head.log")
        yield address
    finally:
        _stop_group(proc)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _wait_for_ray(ray, address, env, proc, log_path, seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        assert proc.poll() is None, f"ray head exited: {log_path.read_text()[-3000:]}"
        probe = subprocess.run([str(ray), "status", f"--address={address}"],
                               capture_output=True, text=True, env=env, check=False)
        if probe.returncode == 0 and "2.0 CPU" in probe.stdout:
            return
        time.sleep(1)
    raise AssertionError(f"ray head not up after {seconds}s: {log_path.read_text()[-3000:]}")


def _stop_group(proc: subprocess.Popen) -> None:
    """The head and every Ray process it started share its process group (new session)."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    try:  # workers that outlived the head
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="session")
def slurm():
    """scripts/slurm_local.sh start/stop in a private folder and port; yields SLURM_CONF."""
    script = REPO_ROOT / "scripts" / "slurm_local.sh"
    folder = tempfile.mkdtemp(prefix="rr-slurm-")
    env = {**os.environ, "RAGREPRO_SLURM_DIR": folder,
           "RAGREPRO_SLURM_PORT": str(free_port_pair())}
    started = subprocess.run([str(script), "start"], capture_output=True, text=True, env=env,
                             timeout=120, check=False)
    try:
        assert started.returncode == 0, (
            f"one-node Slurm did not start (make setup-cluster installs it):\n"
            f"{started.stdout}\n{started.stderr}")
        yield Path(folder) / "slurm.conf"
    finally:
        subprocess.run([str(script), "stop"], capture_output=True, text=True, env=env,
                       timeout=120, check=False)
        shutil.rmtree(folder, ignore_errors=True)
