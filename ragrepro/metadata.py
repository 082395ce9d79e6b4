"""What a result needs to be trusted later: code version, library versions, machine."""
from __future__ import annotations

import importlib.metadata
import platform
import subprocess

from .paths import REPO_ROOT

_PACKAGES = ("torch", "transformers", "tokenizers", "pyserini", "faiss-cpu", "hydra-core",
             "numpy", "datasets", "wandb", "pydivsufsort", "gguf", "ragrepro")


def git_state() -> dict[str, object]:
    def run(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                                  timeout=10, check=False).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = run("rev-parse", "HEAD")
    dirty = bool(run("status", "--porcelain", "--untracked-files=no"))
    return {"git_commit": commit or None, "git_dirty": dirty}


def package_versions() -> dict[str, str]:
    out = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def machine() -> dict[str, object]:
    info: dict[str, object] = {"python": platform.python_version(), "platform": platform.platform(),
                               "processor": platform.processor() or platform.machine()}
    try:
        import os

        import torch

        info["cpu_count"] = os.cpu_count()
        info["torch_threads"] = torch.get_num_threads()
        info["cuda"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:
        pass
    return info
