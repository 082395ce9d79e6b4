"""How many token positions a model reads, from its files and without loading its weights,
so that a window longer than the model is refused before anything loads.

Where the number comes from, by the model node's `source`:
- a `.gguf` file: `<arch>.context_length` in its header (read here, only the key-value part);
- a local folder or a hub id already in the Hugging Face cache: `config.json`'s
  `max_position_embeddings` (or `n_positions`, `n_ctx`, as `ragrepro.models.lm.LM.context_size`
  reads the loaded model);
- `embedded:<name>`: EMBEDDED_POSITIONS for the GGUF models shipped in packages (the value
  their GGUF header declares, checked by tests/reliability/test_bad_values_cli.py), the
  joined ladder GGUF when it is in the cache, the folder's config.json for the others.
None when nothing says (a hub model not downloaded yet, a relative-position model such as
T5): the pipeline checks the loaded model then.
"""
from __future__ import annotations

import json
import logging
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from . import assets, ladder
from .errors import ConfigError
from .paths import cache_dir

log = logging.getLogger(__name__)

# GGUF context_length of the packaged embedded models (their header says so; a test reads it).
# Read from the file when it is at hand; these spare the check assembling a chunked package.
EMBEDDED_POSITIONS = {"smollm2": 8192, "gemma3": 32768}
CONFIG_KEYS = ("max_position_embeddings", "n_positions", "n_ctx")
# RoBERTa-style position ids start after the padding index: two of the table's rows unused.
OFFSET_TWO = ("roberta", "xlm-roberta", "camembert")


def model_positions(node: Mapping[str, Any]) -> tuple[int, str] | None:
    """(positions, where the number was read) of a model node, or None when unknown."""
    source = str(node.get("source") or "")
    if not source:
        return None
    try:
        return _positions_of_source(source, node.get("revision"))
    except (OSError, ValueError, struct.error, ConfigError) as e:
        log.debug("positions of %s unknown (%s)", source, e)
        return None


def _positions_of_source(source: str, revision: Any) -> tuple[int, str] | None:
    if source.startswith("embedded:"):
        return _embedded(source.split(":", 1)[1])
    path = Path(source).expanduser()
    if path.suffix == ".gguf":
        return _from_gguf(path)
    if path.is_dir():
        return _from_config_json(path / "config.json")
    if source.startswith((".", "/", "~")):
        return None  # a missing path: the loader names it
    return _from_hub_cache(source, str(revision) if revision else None)


def _embedded(name: str) -> tuple[int, str] | None:
    if name in EMBEDDED_POSITIONS:
        return EMBEDDED_POSITIONS[name], f"the GGUF of embedded:{name}"
    if name in ladder.LADDER:
        joined = cache_dir() / "assets" / ladder.LADDER[name].filename
        return _from_gguf(joined) if joined.exists() else None
    if name in assets.EMBEDDED:  # a folder in an installed package (minilm)
        return _from_config_json(assets.EMBEDDED[name]() / "config.json")
    return None


def _from_config_json(path: Path) -> tuple[int, str] | None:
    if not path.exists():
        return None
    cfg = json.loads(path.read_text(encoding="utf-8"))
    for key in CONFIG_KEYS:
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            offset = 2 if cfg.get("model_type") in OFFSET_TWO else 0
            return cfg[key] - offset, f"{key} in {path}"
    return None


def _from_hub_cache(repo_id: str, revision: str | None) -> tuple[int, str] | None:
    # deferred: huggingface_hub (a fraction of a second) only for hub ids
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    return _from_config_json(Path(found)) if isinstance(found, str) else None


# -- the GGUF header (gguf spec: little-endian key-value pairs before the tensor infos) ---------
GGUF_MAGIC = b"GGUF"
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9


def _from_gguf(path: Path) -> tuple[int, str] | None:
    found = gguf_context_length(path)
    return (found, f"context_length in {path.name}") if found else None


def gguf_context_length(path: Path) -> int | None:
    """`<architecture>.context_length` from a GGUF file's metadata, or None."""
    with open(path, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise ValueError(f"{path} is not a GGUF file")
        version, _, n_kv = struct.unpack("<IQQ", f.read(20))
        if version < 2:
            raise ValueError(f"{path}: GGUF version {version} is not read here")
        for _ in range(n_kv):
            key = _string(f)
            kind = _unpack(f, "I")
            value = _value(f, kind)
            if key.endswith(".context_length") and isinstance(value, int):
                return value
    return None


def _unpack(f: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize("<" + fmt)
    return struct.unpack("<" + fmt, f.read(size))[0]


def _string(f: BinaryIO) -> str:
    return f.read(_unpack(f, "Q")).decode("utf-8", errors="replace")


def _value(f: BinaryIO, kind: int) -> Any:
    if kind in _SCALARS:
        return _unpack(f, _SCALARS[kind])
    if kind == _STRING:
        return _string(f)
    if kind == _ARRAY:  # skipped, not kept: the tokenizer's vocabulary is one
        item, n = _unpack(f, "I"), _unpack(f, "Q")
        if item in _SCALARS:
            f.seek(n * struct.calcsize("<" + _SCALARS[item]), 1)
        else:
            for _ in range(n):
                _value(f, item)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")
