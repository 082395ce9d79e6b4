"""Resolve a model source to a local folder transformers can load, converting GGUF once.

Sources: `embedded:<name>` (a model shipped in a PyPI package), a path to a `.gguf` file,
a local folder, or a hub id (needs hub access unless already in the HF cache).
"""
from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import shutil
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .. import assets, sources
from ..errors import ConfigError, OfflineError, unknown_name
from ..hashing import file_hash_cached
from ..io import locked
from ..paths import cache_dir

log = logging.getLogger(__name__)


def converted_gguf_dir(gguf_path: Path, kind: str = "causal") -> Path:
    """Dequantise a GGUF file into a transformers folder once, keyed by the file's hash."""
    if not gguf_path.exists():
        raise ConfigError(f"GGUF file {gguf_path} does not exist.")
    digest = file_hash_cached(gguf_path)[:16]
    out = cache_dir() / "models" / f"{gguf_path.stem}-{digest}"
    if (out / "config.json").exists() and not _has_gguf_quant_config(out / "config.json"):
        return out
    # Parallel jobs (a joblib sweep, two test sessions) must not convert the same file twice.
    with locked(out):
        if not (out / "config.json").exists():
            _convert(gguf_path, out, kind)
        strip_gguf_quant_config(out / "config.json")  # folders converted before the fix
    return out


def _has_gguf_quant_config(config_json: Path) -> bool:
    qc = json.loads(config_json.read_text(encoding="utf-8")).get("quantization_config")
    return isinstance(qc, dict) and qc.get("quant_method") == "gguf"


def strip_gguf_quant_config(config_json: Path) -> bool:
    """Drop a GGUF `quantization_config` left in a converted folder's config.json.

    The saved weights are plain dequantised tensors, but with that entry transformers
    attaches its GGUF quantizer on every load (warning that "weights stay packed" and
    marking the model as quantized for PEFT and the Trainer). Returns whether it changed."""
    if not _has_gguf_quant_config(config_json):
        return False
    cfg = json.loads(config_json.read_text(encoding="utf-8"))
    del cfg["quantization_config"]
    tmp = config_json.with_name(f"{config_json.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, config_json)
    log.info("Removed a stale GGUF quantization_config from %s", config_json)
    return True


def _convert(gguf_path: Path, out: Path, kind: str) -> None:
    # deferred: transformers (seconds to import; plan and type users of ragrepro.models skip it)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if kind != "causal":
        raise ConfigError("GGUF models are decoder-only here; set model.kind=causal.")
    log.info("Converting %s to a transformers folder (once; cached in %s)", gguf_path.name, out)
    with gguf_parsed_once():
        tok = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
        model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name,
                                                     dtype=torch.float32)
    # save_pretrained refuses a GGUF-loaded model while it carries its quantizer; the
    # weights are already dequantised, so dropping it is lossless.
    if hasattr(model, "hf_quantizer"):
        del model.hf_quantizer
    model.config.__dict__.pop("quantization_config", None)
    tmp = out.with_name(f"{out.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


@contextlib.contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Within the block, gguf-py parses each file once and builds each tensor-name map once.

    transformers parses the whole file (every vocabulary entry) for the tokenizer, again for
    the config and again for the weights, and rebuilds gguf-py's name map for every tensor:
    about 20 of SmolLM2's 30 conversion seconds; the one parse left reads the file from memory. The reader is a read-only view of the file
    and the map a pure function of its arguments, so the converted weights are the same bytes
    (tests/core/test_lm.py pins them)."""
    # deferred: gguf (only a conversion needs it)
    import gguf
    import gguf.gguf_reader
    import numpy as np

    reader_cls, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}
    # The reader slices its file once per vocabulary entry (262k for Gemma); slicing a
    # np.memmap runs Python code each time, slicing an in-memory array does not (the same
    # bytes: np.fromfile reads the whole file, 253 MB for Gemma, freed with the reader).
    in_memory = types.ModuleType("numpy")
    in_memory.__dict__.update(np.__dict__)
    in_memory.memmap = lambda path, mode="r", **_: np.fromfile(path, dtype=np.uint8)

    def reader(path: Any, mode: str = "r") -> Any:
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = reader_cls(path, mode)
        return readers[key]

    # transformers imports both names inside its functions, so module attributes reach it
    module_np = gguf.gguf_reader.np
    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(None)(name_map)
    gguf.gguf_reader.np = in_memory
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = reader_cls, name_map
        gguf.gguf_reader.np = module_np


def resolve_source(source: str, kind: str = "causal") -> tuple[str, bool]:
    """Return (what from_pretrained gets, is_local). A substitute from the installed source
    resolver (ragrepro.sources; the rehearsal's stand-ins) comes first."""
    standin = sources.current().model_source(source)
    if standin is not None:
        return standin, True
    if source.startswith("embedded:"):
        name = source.split(":", 1)[1]
        if name not in assets.EMBEDDED:
            raise unknown_name("embedded model", name, assets.EMBEDDED)
        path = assets.EMBEDDED[name]()
        if path.suffix == ".gguf":
            return str(converted_gguf_dir(path, kind)), True
        return str(path), True
    path = Path(source).expanduser()
    if path.suffix == ".gguf":
        return str(converted_gguf_dir(path, kind)), True
    if path.exists():
        return str(path), True
    if source.startswith((".", "/", "~")):
        raise ConfigError(f"Model path {source!r} does not exist.")
    return source, False


def offline_error(source: str, err: Exception) -> OfflineError:
    return OfflineError(
        f"Model {source!r} is not available offline ({type(err).__name__}). On a machine with "
        f"hub access run once with HF_HUB_OFFLINE=0 to download it, or point model.source to a "
        f"local folder or .gguf file; the embedded defaults need no download: "
        f"model=smollm2-135m or model=gemma3-270m.")


ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2")


def check_attn_implementation(value: str | None) -> str | None:
    """None (what transformers picks for the model and device) or one of the kernels."""
    if value in (None, "", "null", "default"):
        return None
    if value not in ATTN_IMPLEMENTATIONS:
        raise ConfigError(f"attn_implementation={value!r}; use one of "
                          f"{list(ATTN_IMPLEMENTATIONS)} or null (the transformers default).")
    return str(value)


def load_pretrained(model_cls: Any, path: str, source: str, local: bool, device: Any,
                    dtype: Any, device_map: str | None = None,
                    attn_implementation: str | None = None,
                    **common: Any) -> tuple[Any, Any]:
    """(tokenizer, model) from a resolved source, in eval mode and on `device` unless
    `device_map` places it; a hub model missing offline becomes OfflineError. `common`
    (revision, trust_remote_code) goes to both from_pretrained calls; `attn_implementation`
    (None: transformers' choice) to the model's only."""
    # deferred: transformers (seconds to import; plan and type users of ragrepro.models skip it)
    from transformers import AutoTokenizer

    kw: dict[str, Any] = {**common, "dtype": dtype}
    if device_map:
        kw["device_map"] = device_map
    if attn_implementation:
        kw["attn_implementation"] = attn_implementation
    try:
        tok = AutoTokenizer.from_pretrained(path, **common)
        model = model_cls.from_pretrained(path, **kw)
    except OSError as e:
        if not local:
            raise offline_error(source, e) from e
        raise
    except (ImportError, ValueError) as e:
        text = str(e).lower()
        if attn_implementation and ("attn" in text or "flash" in text):
            raise ConfigError(f"attn_implementation={attn_implementation!r} cannot be used for "
                              f"{source!r} here ({type(e).__name__}: {e}). flash_attention_2 "
                              f"needs a CUDA GPU and the flash-attn package; use sdpa or eager."
                              ) from e
        raise
    if not device_map:
        model.to(device)
    model.eval()
    return tok, model
