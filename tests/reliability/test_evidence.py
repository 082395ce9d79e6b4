"""Evidence bundles (ragrepro/evidence.py): the runs behind a committed table, packed
deterministically and unpacked into folders and rows equal to the originals."""
import gzip
import json

import pytest

from ragrepro import evidence
from ragrepro.errors import DataError
from ragrepro.tracking import Run, read_csv


def _run(root, run_id, nlls):
    run = Run("x/table", run_id, root)
    run.start()
    for i, v in enumerate(nlls):
        run.add_sample({"text": 0, "window": i, "nll_sum": v, "n_scored": 16})
    run.timings["score"] = 2.0
    (run.work_dir / "wandb").mkdir()
    (run.work_dir / "wandb" / "log.txt").write_text("not evidence")
    run.finish({"name": "x/table", "seed": 0}, {"nll_sum": sum(nlls), "n_windows": len(nlls)},
               {"model": "m", "seed": 0}, {"git_commit": "abc", "started_at": 1_700_000_000.0})
    return run


def test_pack_then_unpack_gives_the_same_folders_and_rows(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    _run(src, "aaa", [1.5, 2.25])
    _run(src, "bbb", [3.0])
    (src / "x" / "table" / "tmp_ccc").mkdir()  # unfinished: never packed
    path = evidence.pack(src, "x/table", tmp_path / "b.jsonl.gz")
    dirs = evidence.unpack(path, dst)
    assert [d.name for d in dirs] == ["aaa", "bbb"]
    for d in dirs:
        orig = src / "x" / "table" / d.name
        names = sorted(p.name for p in d.iterdir())
        assert names == ["config.json", "metrics.json", "samples.jsonl"]  # no wandb/
        for n in names:
            assert (d / n).read_text() == (orig / n).read_text()
    cols = ("run_id", "model", "nll_sum", "n_windows", "git_commit", "wall_s")
    assert [{c: r[c] for c in cols} for r in read_csv(dst / "x" / "table.csv")] == \
           [{c: r[c] for c in cols} for r in read_csv(src / "x" / "table.csv")]


def test_packing_is_deterministic(tmp_path):
    _run(tmp_path, "aaa", [1.5])
    one = evidence.pack(tmp_path, "x/table", tmp_path / "1.gz").read_bytes()
    two = evidence.pack(tmp_path, "x/table", tmp_path / "2.gz").read_bytes()
    assert one == two
    header = json.loads(gzip.decompress(one).decode().splitlines()[0])
    assert header == {"experiment": "x/table", "format": "ragrepro-evidence", "runs": 1,
                      "version": 1}


def test_unpack_keeps_a_run_computed_here(tmp_path):
    _run(tmp_path / "a", "aaa", [1.5])
    path = evidence.pack(tmp_path / "a", "x/table", tmp_path / "b.gz")
    _run(tmp_path / "dst", "aaa", [9.0])
    evidence.unpack(path, tmp_path / "dst")
    data = json.loads((tmp_path / "dst" / "x" / "table" / "aaa" / "metrics.json").read_text())
    assert data["metrics"]["nll_sum"] == 9.0


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[: len(b) // 2], "is damaged"),
    (lambda b: b"hello", "is damaged"),
    (lambda b: gzip.compress(b'{"format": "other"}\n'), "not a ragrepro evidence bundle"),
    (lambda b: gzip.compress(gzip.decompress(b).split(b"\n", 1)[0] + b"\n"),
     "header says version 1 with 1 runs, the file holds 0"),
])
def test_a_damaged_bundle_is_refused_by_name(tmp_path, damage, message):
    _run(tmp_path, "aaa", [1.5])
    path = evidence.pack(tmp_path, "x/table", tmp_path / "b.jsonl.gz")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(DataError, match=message) as e:
        evidence.read_bundle(path)
    assert str(path) in str(e.value)


def test_nothing_to_pack_says_what_to_run(tmp_path):
    with pytest.raises(DataError, match=r"ragrepro -m experiment=x/table"):
        evidence.pack(tmp_path, "x/table")
