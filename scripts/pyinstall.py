"""`pip install`, run by uv when it can: the installer behind `make setup`.

    python -m scripts.pyinstall [--installer uv|pip] -- <pip install arguments>

uv resolves and installs the same versions as pip from the same indexes and byte-compiles in
parallel: on a 2-core machine a fresh `make setup` took 65 s against pip's 126 s, with an
identical `pip freeze` (docs/performance.md). uv does not read pip's configuration, so the
index, find-links and constraint settings pip would use (`pip config list`, which includes
the PIP_* environment) are passed to it as flags. uv itself comes from the package index
into the same venv; if it cannot be installed or fails, pip runs instead, with a warning.
Standard library only: it runs before the project is installed.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable

log = logging.getLogger("pyinstall")

# pip's option -> uv's flag; both take one value per flag, lists are space-separated in pip
FLAGS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url",
         "find-links": "--find-links", "constraint": "--constraint"}
_LINE = re.compile(r"^(?P<scope>[^.]*)\.(?P<key>[a-z-]+)=(?P<q>['\"])(?P<value>.*)(?P=q)$")


def pip_settings(config_list: str) -> dict[str, list[str]]:
    """The index settings in `pip config list` output (`global.find-links='/opt/wheels'`,
    `:env:.constraint='...'`). As in pip, a PIP_* variable replaces the files' value and a
    later file (global, user, site: the order pip lists them) replaces an earlier one."""
    found: dict[str, list[tuple[bool, str]]] = {}
    for line in config_list.splitlines():
        m = _LINE.match(line.strip())
        if m and m["key"] in FLAGS:
            found.setdefault(m["key"], []).append((m["scope"] == ":env:", m["value"]))
    out = {}
    for key, values in found.items():
        env = [v for is_env, v in values if is_env]
        chosen = env[-1] if env else values[-1][1]
        out[key] = chosen.split()
    return out


def local_path(location: str) -> str | None:
    """The file system path of a local location (a path or file:// URL), else None."""
    if location.startswith("file://"):
        return location[len("file://"):]
    return None if "://" in location else location


def uv_flags(settings: dict[str, list[str]],
             exists: Callable[[str], bool] = os.path.exists) -> list[str]:
    """uv flags for pip's settings. A local index or link folder that does not exist is left
    out: pip only warns about one, uv stops."""
    flags: list[str] = []
    for key, values in settings.items():
        for v in values:
            path = local_path(v)
            if path is not None and not exists(path):
                log.debug("leaving out %s %s: not on this machine", key, v)
                continue
            flags += [FLAGS[key], v]
    return flags


def run(cmd: Iterable[str], env: dict[str, str] | None = None) -> int:
    return subprocess.run(list(cmd), check=False, env=env).returncode


def have_uv(py: str) -> bool:
    ok = subprocess.run([py, "-m", "uv", "--version"], capture_output=True, check=False)
    if ok.returncode == 0:
        return True
    return run([py, "-m", "pip", "install", "-q", "uv"]) == 0


def pip_config_list(py: str) -> str:
    return subprocess.run([py, "-m", "pip", "config", "list"], capture_output=True, text=True,
                          check=False).stdout


def uv_env(settings_text: str) -> dict[str, str]:
    env = dict(os.environ)
    cert = re.search(r"^[^.]*\.cert=['\"](.*)['\"]$", settings_text, re.MULTILINE)
    if cert and "SSL_CERT_FILE" not in env:
        env["SSL_CERT_FILE"] = cert.group(1)  # uv reads the system store, not pip's cert
    return env


def install(args: list[str], installer: str) -> int:
    py = sys.executable
    pip = [py, "-m", "pip", "install", "-q", *args]
    if installer == "pip":
        return run(pip)
    if not have_uv(py):
        log.warning("uv could not be installed from the package index; installing with pip")
        return run(pip)
    listed = pip_config_list(py)
    # unsafe-best-match: every index's versions are candidates, as in pip (uv's default takes
    # a package from the first index that has it, and misses versions on a later one)
    cmd = [py, "-m", "uv", "pip", "install", "-q", "--python", py, "--compile-bytecode",
           "--index-strategy", "unsafe-best-match", *uv_flags(pip_settings(listed)), *args]
    if run(cmd, uv_env(listed)) == 0:
        return 0
    log.warning("uv failed (above); installing with pip instead (make setup INSTALLER=pip "
                "skips uv)")
    return run(pip)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--installer", choices=("uv", "pip"), default="uv")
    p.add_argument("pip_args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    args = a.pip_args[1:] if a.pip_args[:1] == ["--"] else a.pip_args
    if not args:
        p.error("give what to install after --, as to pip install")
    logging.basicConfig(level=logging.INFO, format="pyinstall: %(message)s")
    return install(args, a.installer)


if __name__ == "__main__":
    sys.exit(main())
