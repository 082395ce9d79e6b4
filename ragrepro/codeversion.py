"""Which code computed a run, and what happens when the code changed since (issue 14).

Every run records its code version (ragrepro.metadata.git_state). The run id hashes the
config only, so after a code change the same command finds the earlier run:
- a half-finished run (records in `tmp_<id>/`) would be completed by other code, mixing two
  versions in one result: refused unless `allow_code_change=true`, and then recorded;
- a finished run is reused (its numbers are what that code computed) and announced, naming
  both versions; its row keeps its own version; `overwrite=true` recomputes it.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .io import atomic_write_json
from .run_files import read_run_json

log = logging.getLogger(__name__)
CODE_FILE = "code.json"
VERSION_KEYS = ("code_version", "code_id", "git_commit", "git_dirty")
UNKNOWN = {"code_version": "unknown (recorded before runs recorded their code version)"}


def version_of(metadata: dict[str, Any]) -> dict[str, Any]:
    """The code-version fields of a run's metadata (absent ones are left out)."""
    return {k: metadata[k] for k in VERSION_KEYS if metadata.get(k) is not None}


def describe(v: dict[str, Any]) -> str:
    if v.get("code_version"):
        return str(v["code_version"])
    if v.get("git_commit"):
        return f"git:{str(v['git_commit'])[:12]}" + ("+dirty" if v.get("git_dirty") else "")
    return UNKNOWN["code_version"]


def same_code(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Same code id; for versions recorded without one: the same clean commit (a dirty tree
    of unknown content is never the same)."""
    if a.get("code_id") and b.get("code_id"):
        return a["code_id"] == b["code_id"]
    return (bool(a.get("git_commit")) and a.get("git_commit") == b.get("git_commit")
            and a.get("git_dirty") is False and b.get("git_dirty") is False)


def _has_work(work_dir: Path) -> bool:
    return work_dir.is_dir() and any(p.name != CODE_FILE for p in work_dir.iterdir())


def check_resume(work_dir: Path, current: dict[str, Any], allow: bool) -> list[dict[str, Any]]:
    """The code versions of a run's records, the current one last; records it in the run's
    working folder. Refuses to continue records written by other code unless `allow`."""
    path = work_dir / CODE_FILE
    recorded = read_run_json(path, {"versions": list})["versions"] if path.exists() else None
    if not _has_work(work_dir):
        versions = [version_of(current)]
    else:
        versions = recorded or [dict(UNKNOWN)]
        if not same_code(versions[-1], current):
            if not allow:
                raise ConfigError(
                    f"The half-finished run in {work_dir} was computed with code "
                    f"{describe(versions[-1])}; the current code is {describe(current)}. "
                    f"Finishing it would mix two code versions in one result. Set "
                    f"overwrite=true to start it over with this code, or "
                    f"allow_code_change=true to resume it anyway (the row then lists both "
                    f"versions in code_versions_mixed).")
            log.warning("Resuming the half-finished run in %s computed with code %s using code "
                        "%s (allow_code_change=true); the row lists both.", work_dir,
                        describe(versions[-1]), describe(current))
            versions = versions + [version_of(current)]
    work_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"versions": versions})
    return versions


def announce_reuse(run_name: str, metadata: dict[str, Any], current: dict[str, Any]) -> bool:
    """Log when a finished run being reused was computed by other code; True if it was."""
    if same_code(metadata, current):
        return False
    log.warning("Reusing finished run %s computed with code %s; the current code is %s. Its "
                "numbers and row keep their own code version; set overwrite=true to recompute "
                "it with the current code.", run_name, describe(metadata), describe(current))
    return True


def mixed(versions: list[dict[str, Any]]) -> str | None:
    """The `code_versions_mixed` column: every version that wrote the run, or None."""
    return " ; ".join(describe(v) for v in versions) if len(versions) > 1 else None
