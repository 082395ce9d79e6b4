"""Two processes building one cache entry at once (ragrepro.io.private_tmp, publish_dir): the
FilCo models, the tiny T5, the predictive reranker and the RICHES key index are built in a
folder of their own process and put in place with one rename."""
from __future__ import annotations

import os
from pathlib import Path

from ragrepro.io import private_tmp, publish_dir


def _build(tmp: Path, text: str) -> Path:
    tmp.mkdir(parents=True)
    (tmp / "weights").write_text(text, encoding="utf-8")
    (tmp / "info.json").write_text("{}", encoding="utf-8")
    return tmp


def test_each_process_builds_in_its_own_folder(tmp_path):
    dest = tmp_path / "entry"
    assert private_tmp(dest) == tmp_path / f"entry.tmp{os.getpid()}"
    assert private_tmp(dest) != dest.with_name("entry.tmp")  # the old shared name


def test_two_writers_interleaved_leave_one_whole_entry(tmp_path):
    dest = tmp_path / "entry"
    # both start before either finishes; neither removes the other's half-built copy
    a = _build(tmp_path / "entry.tmpA", "A")
    b = _build(tmp_path / "entry.tmpB", "B")
    assert publish_dir(a, dest, complete="info.json") is True
    assert publish_dir(b, dest, complete="info.json") is False
    assert (dest / "weights").read_text(encoding="utf-8") == "A"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]


def test_a_torn_entry_is_replaced_and_a_rebuild_replaces_without_complete(tmp_path):
    dest = tmp_path / "entry"
    dest.mkdir()
    (dest / "weights").write_text("torn", encoding="utf-8")  # no info.json: unfinished
    assert publish_dir(_build(tmp_path / "t1", "new"), dest, complete="info.json") is True
    assert (dest / "weights").read_text(encoding="utf-8") == "new"
    # without `complete` (a stale entry rebuilt on purpose) the finished one is replaced too
    assert publish_dir(_build(tmp_path / "t2", "newer"), dest) is True
    assert (dest / "weights").read_text(encoding="utf-8") == "newer"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry"]
