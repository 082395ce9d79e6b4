"""benchmarks/memory_bandwidth.py: the rows the planner's CPU device reads."""
import pytest

from benchmarks import memory_bandwidth as mb
from ragrepro import plan


def test_rows_are_work_over_cpu_seconds_and_feed_the_cpu_device():
    rows = mb.measure(mib=8, threads=1, repeat=1)
    assert [r["kind"] for r in rows] == ["read", "copy", "matvec", "matmul"]
    read, copy, matvec, matmul = rows
    assert read["rate"] == pytest.approx(8 * 2**20 / read["cpu_seconds"] / 1e9)
    assert copy["rate"] == pytest.approx(2 * 8 * 2**20 / copy["cpu_seconds"] / 1e9)
    assert matmul["rate"] == pytest.approx(2 * 1024**3 / matmul["cpu_seconds"] / 1e9)
    device = plan.cpu_device([{k: str(v) for k, v in r.items()} for r in rows])
    assert device.bandwidth == pytest.approx(matvec["rate"] * 1e9)
    assert device.flops == pytest.approx(plan.CPU_MATMUL_SHARE * matmul["rate"] * 1e9)
    assert "| matvec | 8 | 1 |" in mb.render(rows)
