"""ragrepro.cache: a value is computed once, stored as JSON, and read back the same way."""
from __future__ import annotations

import json

from ragrepro.cache import cache_path, cached_json


def test_computed_once_and_read_back_as_json(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("RAGREPRO_CACHE", str(tmp_path))
    path = cache_path("method", "kind", "abc.json")
    assert path == tmp_path / "method" / "kind" / "abc.json"
    calls = []

    def compute() -> dict:
        calls.append(1)
        return {"keys": ("a", "b"), "n": 2}

    first = cached_json(path, compute)
    assert first == {"keys": ["a", "b"], "n": 2}  # a tuple comes back as JSON's list
    assert cached_json(path, compute) == first and calls == [1]
    assert json.loads(path.read_text()) == first
    assert not list(path.parent.glob(".abc.json.*"))  # no temporary file left behind
