"""What a run used of the machine, recorded in its metrics.json metadata (`usage`): the peak
resident memory of the process and of the child processes it waited for, so that a plan's
memory estimate can be checked against a finished run (scripts/plan_validation.py).

`ru_maxrss` is the high-water mark of the resident set since the process started, so the
figure written when a run is finalised is the run's peak (in a sweep of several cells in one
process: the peak of every cell so far, which is why the experiment's own cell count matters
when reading it). Linux reports kilobytes, macOS bytes."""
from __future__ import annotations

import resource
import sys
from typing import Any

# ru_maxrss unit: bytes on macOS, kilobytes elsewhere (Linux, the BSDs)
_RSS_UNIT = 1 if sys.platform == "darwin" else 1024


def maxrss_bytes(ru_maxrss: int, unit: int = _RSS_UNIT) -> int:
    """ru_maxrss (in the platform's unit) in bytes."""
    return int(ru_maxrss) * unit


def peak_usage() -> dict[str, Any]:
    """{'peak_rss_bytes': this process's peak, 'children_peak_rss_bytes': the largest of its
    waited-for children (0 when it started none; pyserini's JVM runs in-process). A forked
    child counts the parent's pages it shared at the fork, so a `git` call made by a 1 GB
    process reads about 1 GB there: the figure bounds the children, it does not add to the
    process's own."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"peak_rss_bytes": maxrss_bytes(own), "children_peak_rss_bytes": maxrss_bytes(children)}
