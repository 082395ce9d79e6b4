"""The launcher fixtures themselves (issue 24): private ports outside the kernel's ephemeral
range, process groups waited for until really gone, stale folders of killed sessions told
apart from live ones, pid files that name another program left alone, and a second Ray head
beside the session's one (a Ray holding the default port 10001 used to stop `ray start`)."""
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import ray_local
from launcher_helpers import (
    OWNER,
    claim,
    ephemeral_range,
    free_port_pair,
    free_ports,
    group_members,
    stale_folders,
    start_time,
    wait_gone,
)
from ray_local import ray_head_running

from ragrepro.paths import REPO_ROOT


def test_free_ports_are_distinct_bindable_and_outside_the_ephemeral_range():
    ports = free_ports(10)
    assert len(set(ports)) == 10
    assert all(24000 <= p < ephemeral_range()[0] for p in ports)
    assert not {6379, 8265, 10001, 52365} & set(ports)  # Ray's fixed defaults
    for p in ports:  # still free: nothing was left bound
        with socket.socket() as s:
            s.bind(("", p))
    p = free_port_pair()
    with socket.socket() as a, socket.socket() as b:
        a.bind(("", p))
        b.bind(("", p + 1))


def test_a_zombie_counts_as_gone_a_live_member_does_not():
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert group_members(proc.pid) == [proc.pid]
        assert wait_gone(proc.pid, 0.3) == [proc.pid]  # bounded: returns the survivor
        os.kill(proc.pid, signal.SIGKILL)
        # not reaped yet: a zombie, which holds no port or file
        assert wait_gone(proc.pid, 10) == []
    finally:
        proc.kill()
        proc.wait()


def test_stale_folders_are_those_of_dead_or_reused_pids_only():
    prefix = f"rr-test-stale-{os.getpid()}-"
    live, dead, reused, foreign = (Path(tempfile.mkdtemp(prefix=prefix)) for _ in range(4))
    try:
        claim(live)
        gone = subprocess.Popen(["true"])
        gone.wait()
        (dead / OWNER).write_text(f"{gone.pid} 12345")
        (reused / OWNER).write_text(f"{os.getpid()} 1")  # our pid, another start time
        assert sorted(stale_folders(prefix)) == sorted([dead, reused])
        assert foreign not in stale_folders(prefix)  # no owner file: left alone
    finally:
        for f in (live, dead, reused, foreign):
            subprocess.run(["rm", "-rf", str(f)], check=False)


def test_a_dead_sessions_ray_is_stopped_and_a_reused_group_number_is_not():
    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    leftover = subprocess.Popen(["sleep", "60"], start_new_session=True)  # its "Ray"
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    folders = [Path(tempfile.mkdtemp(prefix="rr-ray-")) for _ in range(2)]
    try:
        for folder, proc, started in ((folders[0], leftover, start_time(leftover.pid)),
                                      (folders[1], bystander, "1")):  # recorded: another start
            (folder / OWNER).write_text(f"{dead_owner.pid} 12345")
            (folder / "head.pgid").write_text(f"{proc.pid} {started}")
        ray_local._reap_stale_ray()
        assert leftover.wait(timeout=15) == -signal.SIGKILL
        assert bystander.poll() is None  # its group number only looks like the recorded one
        assert not any(f.exists() for f in folders)
    finally:
        for proc in (leftover, bystander):
            proc.kill()
            proc.wait()


def test_slurm_stop_leaves_a_process_whose_pid_a_stale_pid_file_names(tmp_path):
    """After a crash the pid in slurmd.pid may belong to any program by now."""
    other = subprocess.Popen(["sleep", "60"], cwd="/")
    try:
        (tmp_path / "munge").mkdir()
        for name in ("slurmd.pid", "slurmctld.pid", "munge/munged.pid"):
            (tmp_path / name).write_text(str(other.pid))
        out = subprocess.run([str(REPO_ROOT / "scripts" / "slurm_local.sh"), "stop"],
                             env={**os.environ, "RAGREPRO_SLURM_DIR": str(tmp_path)},
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, out.stderr
        time.sleep(0.2)
        assert other.poll() is None, "stop killed a process that is not a Slurm daemon"
        assert not (tmp_path / "slurmd.pid").exists()  # the stale file is gone
    finally:
        other.kill()
        other.wait()


@pytest.mark.cluster
def test_second_ray_head_beside_the_session_head(ray_head):
    """Ray's default ports held (as a second Ray on the machine holds them) and the session's
    head running: another head still starts, answers, and stops without leftovers."""
    held = []
    for port in (6379, 10001, 52365, 44217, 44227):
        s = socket.socket()
        try:
            s.bind(("", port))
            s.listen()
            held.append(s)
        except OSError:  # someone else holds it: the situation this test is about
            s.close()
    try:
        with ray_head_running() as address:
            assert address != ray_head
    finally:
        for s in held:
            s.close()
