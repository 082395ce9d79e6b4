"""ragrepro/usage.py: a run's peak resident memory, recorded in its metrics.json."""
import json
import os
from pathlib import Path

import numpy as np
import pytest

from ragrepro import usage
from ragrepro.tracking import Run


def test_ru_maxrss_units():
    assert usage.maxrss_bytes(1000, 1024) == 1_024_000  # Linux: kilobytes
    assert usage.maxrss_bytes(1000, 1) == 1000          # macOS: bytes


def test_the_peak_grows_with_what_the_process_touched():
    before = usage.peak_usage()["peak_rss_bytes"]
    block = np.ones(300 * 2**20 // 8)  # 300 MiB, every page written
    after = usage.peak_usage()["peak_rss_bytes"]
    assert block.sum() == block.size
    # the high-water mark is at least the old peak and covers the new block when it did not
    # fit under it (a process that already peaked higher may show no growth)
    assert after >= before and after >= 300 * 2**20
    if os.path.exists("/proc/self/status"):  # Linux: the kernel's own high-water mark
        status = Path("/proc/self/status").read_text().splitlines()
        hwm_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
        assert after == pytest.approx(hwm_kb * 1024, rel=0.05)


def test_a_finished_run_records_its_peak_rss(tmp_path):
    run = Run("exp/x", "abc123", tmp_path)
    run.write_results({"a": 1}, {"m": 1.0}, {"s": 1}, {"git_commit": "x"})
    got = json.loads((run.work_dir / "metrics.json").read_text())["metadata"]["usage"]
    assert got["peak_rss_bytes"] >= usage.peak_usage()["peak_rss_bytes"] * 0.5 > 0
    assert set(got) == {"peak_rss_bytes", "children_peak_rss_bytes"}
