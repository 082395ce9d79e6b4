"""By-name entry points kept for callers written before issue 15 (`load_qa("vital-qa", "test")`,
inline configs with `_target_: ragrepro.data.loaders.load_qa` and a `name`). They only read
conf/dataset/<name>.yaml through `ragrepro.data.catalog.load_named`; there is no dispatch on
the name here. New code: `load_named(name, split=..., limit=...)`, or the dataset's own
loader (`_target_` in its YAML)."""
from __future__ import annotations

from typing import Any

from .catalog import load_named
from .records import LMDoc, QARecord
from .vital_qa import VITAL_QA_VERSION, vital_qa_path

__all__ = ["VITAL_QA_VERSION", "load_lm_docs", "load_qa", "vital_qa_path"]


def _overrides(split: str, path: str | None, limit: int | None, **more: Any) -> dict[str, Any]:
    given = {"split": split, "limit": limit, **more}
    if path is not None:
        given["path"] = path
    return {k: v for k, v in given.items() if v is not None or k == "limit"}


def load_qa(name: str, split: str = "test", path: str | None = None, limit: int | None = None,
            hops: int | None = None, **_: Any) -> list[QARecord]:
    """The QA records of conf/dataset/<name>.yaml (split, path, limit, hops overridden)."""
    return load_named(name, **_overrides(split, path, limit, hops=hops))  # type: ignore[return-value]


def load_lm_docs(name: str, split: str = "test", variant: str | None = None,
                 path: str | None = None, limit: int | None = None, **_: Any) -> list[LMDoc]:
    """The documents of conf/dataset/<name>.yaml (split, variant, path, limit overridden)."""
    return load_named(name, **_overrides(split, path, limit, variant=variant))  # type: ignore[return-value]
