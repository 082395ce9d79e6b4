"""Job states from `scontrol` where Slurm keeps no accounting (no slurmdbd, so no `sacct`).

submitit reads job states with `sacct` only; without it, a job that died before writing its
result (killed, out of memory, node lost) would be waited for forever. Small clusters and the
one-node test Slurm (scripts/slurm_local.sh) have no accounting; clusters that have it keep
submitit's own `sacct` watcher.

How often the states are read: submitit's back-off (at 2, 4, 8, 16 s ... after the last
submission, then every `delay_s`), with `delay_s` = RAGREPRO_SLURM_POLL_S (default 60 s, as
submitit). A job that ends at 9 s is seen at about 16 s; the test suite's one-node Slurm sets
2 s, where a poll is one local `scontrol` call.
"""
from __future__ import annotations

import os
import re
import subprocess
from typing import Any

from ragrepro.errors import ConfigError

POLL_ENV = "RAGREPRO_SLURM_POLL_S"

_FIELD = re.compile(r"(\w+)=(\S*)")


def expand_tasks(spec: str) -> list[str]:
    """'0-2,5%4' -> ['0', '1', '2', '5'] (a pending array's task list)."""
    out: list[str] = []
    for part in spec.split("%")[0].split(","):
        if "-" in part:
            lo, hi = part.split("-")
            out += [str(i) for i in range(int(lo), int(hi) + 1)]
        elif part:
            out.append(part)
    return out


def parse_scontrol(text: str) -> dict[str, dict[str, str]]:
    """`scontrol show job -o` lines -> {job id as submitit names it: {State, NodeList}}."""
    info: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        if "JobId" not in fields:
            continue
        stats = {"JobID": fields["JobId"], "State": fields.get("JobState", "UNKNOWN"),
                 "NodeList": fields.get("NodeList", "")}
        info[fields["JobId"]] = stats
        array, task = fields.get("ArrayJobId"), fields.get("ArrayTaskId")
        if array and task:
            for t in expand_tasks(task):
                info[f"{array}_{t}"] = stats
    return info


def accounting_disabled() -> bool:
    config = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                            check=False).stdout
    match = re.search(r"^AccountingStorageType\s*=\s*(\S+)", config, re.MULTILINE)
    return match is not None and match.group(1).endswith("/none")


def install_if_needed() -> bool:
    """Swap submitit's watcher for the scontrol one when the cluster has no accounting."""
    from submitit.slurm import slurm

    if isinstance(slurm.SlurmJob.watcher, _watcher_class()) or not accounting_disabled():
        return False
    slurm.SlurmJob.watcher = _watcher_class()(delay_s=poll_cap_s())
    return True


def poll_cap_s() -> float:
    """The longest wait between two job-state reads (RAGREPRO_SLURM_POLL_S, default 60)."""
    raw = os.environ.get(POLL_ENV, "60")
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise ConfigError(f"{POLL_ENV}={raw!r}: give the longest wait between two Slurm "
                          f"job-state reads in seconds, a positive number (default 60).")
    return value


def _watcher_class() -> Any:
    from submitit.slurm.slurm import SlurmInfoWatcher

    class ScontrolWatcher(SlurmInfoWatcher):
        def _make_command(self) -> list[str] | None:
            # `scontrol show job` takes one id; all jobs in one call is cheaper than one per array
            todo = self._registered - self._finished
            return ["scontrol", "show", "job", "-o"] if todo else None

        def read_info(self, string: bytes | str) -> dict[str, dict[str, str]]:
            return parse_scontrol(string.decode() if isinstance(string, bytes) else string)

    global _WATCHER
    if _WATCHER is None:
        _WATCHER = ScontrolWatcher
    return _WATCHER


_WATCHER: Any = None
