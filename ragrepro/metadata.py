"""What a result needs to be trusted later: code version, library versions, machine."""
from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path

import torch

from . import methods
from .paths import REPO_ROOT

_PACKAGES = ("torch", "transformers", "tokenizers", "pyserini", "faiss-cpu", "hydra-core",
             "numpy", "datasets", "wandb", "pydivsufsort", "gguf", "ragrepro")


# What computes a number: a commit that only touches docs or tests leaves the code id alone.
# The core's paths; each registered method adds its packages (ragrepro.methods.code_paths).
CODE_PATHS = ("ragrepro", "conf", "scripts", "pyproject.toml")


def code_paths() -> tuple[str, ...]:
    """CODE_PATHS and the method packages, in the order the code id has always hashed them
    (git ls-tree sorts its output, so the order only matters for reading)."""
    return CODE_PATHS[:1] + methods.code_paths() + CODE_PATHS[1:]


def _git(*args: str) -> tuple[int, str]:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                             errors="replace", timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return 1, ""
    return out.returncode, out.stdout


@lru_cache(maxsize=1)
def git_state() -> dict[str, object]:
    """The code version this process runs (computed once: it is the code that was imported).

    git_commit / git_dirty: HEAD and whether tracked files differ from it. code_id: hash of
    the code paths' trees at HEAD plus their uncommitted diff; two runs with the same
    code_id ran the same code. code_version: the readable form, `git:<commit>[+dirty:<diff
    hash>]`, or `package:ragrepro==<version>` outside a git checkout (no dirty flag)."""
    rc, head = _git("rev-parse", "HEAD")
    if rc != 0 or not head.strip():
        return package_code_version()
    commit = head.strip()
    dirty = bool(_git("status", "--porcelain", "--untracked-files=no")[1].strip())
    trees = _git("ls-tree", "HEAD", "--", *code_paths())[1]
    diff = _git("diff", "HEAD", "--", *code_paths())[1]
    version = f"git:{commit[:12]}" + (f"+dirty:{_sha(diff)[:8]}" if diff else "")
    return {"git_commit": commit, "git_dirty": dirty, "code_version": version,
            "code_id": _sha(trees + "\0" + diff)[:16]}


def package_code_version() -> dict[str, object]:
    try:
        version = importlib.metadata.version("ragrepro")
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    name = f"package:ragrepro=={version}"
    return {"git_commit": None, "git_dirty": None, "code_version": name, "code_id": name}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), with its widest vector extension:
    another CPU type, or the same one without AVX-512, sums in another order, so float noise
    between two machines' runs is explained by this line (ragrepro verify --runs)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return platform.processor() or platform.machine()
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    name = fields.get("model name") or platform.processor() or platform.machine()
    flags = set(fields.get("flags", "").split())
    widest = next((f for f in ("avx512f", "avx2", "avx", "sse4_2", "asimd") if f in flags), "")
    return f"{name} ({widest})" if widest else name


def machine() -> dict[str, object]:
    info: dict[str, object] = {"python": platform.python_version(), "platform": platform.platform(),
                               "processor": platform.processor() or platform.machine()}
    info["cpu"] = cpu_model()
    info["cpu_count"] = os.cpu_count()
    info["torch_threads"] = torch.get_num_threads()
    info["cuda"] = torch.cuda.is_available()
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info
