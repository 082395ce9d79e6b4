"""Every row records the code version; a half-finished run written by other code is refused
unless allowed, a finished one is reused with an announcement (issue 14)."""
from __future__ import annotations

import json
import logging
import re

import pytest
from hydra import compose, initialize_config_dir

from ragrepro import faults, metadata
from ragrepro.codeversion import check_resume, describe, mixed, same_code
from ragrepro.errors import ConfigError, RagreproError
from ragrepro.paths import CONF_DIR
from ragrepro.runner import execute
from ragrepro.tracking import COSMETIC_KEYS, read_csv

A = {"git_commit": "a" * 40, "git_dirty": False, "code_version": "git:aaaaaaaaaaaa",
     "code_id": "id-a"}
B = {"git_commit": "b" * 40, "git_dirty": True, "code_version": "git:bbbbbbbbbbbb+dirty:12345678",
     "code_id": "id-b"}


def test_this_checkout_has_a_git_code_version() -> None:
    v = metadata.git_state.__wrapped__()
    assert re.fullmatch(r"[0-9a-f]{40}", str(v["git_commit"]))
    assert str(v["code_version"]).startswith(f"git:{str(v['git_commit'])[:12]}")
    assert ("+dirty:" in str(v["code_version"])) <= bool(v["git_dirty"])
    assert len(str(v["code_id"])) == 16


def test_outside_git_the_package_version_is_the_code_version(monkeypatch) -> None:
    monkeypatch.setattr(metadata, "_git", lambda *a: (128, ""))
    monkeypatch.setattr(metadata.importlib.metadata, "version", lambda name: "9.9.9")
    v = metadata.git_state.__wrapped__()
    assert v == {"git_commit": None, "git_dirty": None, "code_version": "package:ragrepro==9.9.9",
                 "code_id": "package:ragrepro==9.9.9"}


def test_same_code_and_describe() -> None:
    assert same_code(A, dict(A, git_commit="c" * 40))  # a docs-only commit: same code id
    assert not same_code(A, B)
    old_clean = {"git_commit": "a" * 40, "git_dirty": False}  # recorded before code ids
    assert same_code(old_clean, dict(old_clean))
    assert not same_code(dict(old_clean, git_dirty=True), dict(old_clean, git_dirty=True))
    assert not same_code({}, A)
    assert describe(old_clean) == "git:aaaaaaaaaaaa" and describe(B) == B["code_version"]
    assert "unknown" in describe({})
    assert mixed([A]) is None and mixed([A, B]) == f"{A['code_version']} ; {B['code_version']}"
    assert "allow_code_change" in COSMETIC_KEYS  # the option does not change the run id


def test_check_resume_refuses_records_of_other_code(tmp_path, caplog) -> None:
    work = tmp_path / "tmp_run"
    assert check_resume(work, A, allow=False) == [A]  # a fresh run records its version
    (work / "samples.jsonl").write_text('{"idx": 0}\n')
    assert check_resume(work, dict(A), allow=False) == [A]  # same code resumes
    with pytest.raises(ConfigError) as err:
        check_resume(work, B, allow=False)
    msg = str(err.value)
    assert A["code_version"] in msg and B["code_version"] in msg
    assert "allow_code_change=true" in msg and "overwrite=true" in msg
    with caplog.at_level(logging.WARNING):
        assert check_resume(work, B, allow=True) == [A, B]
    assert A["code_version"] in caplog.text and B["code_version"] in caplog.text
    assert json.loads((work / "code.json").read_text())["versions"] == [A, B]
    legacy = tmp_path / "tmp_legacy"  # records left before versions were recorded
    legacy.mkdir()
    (legacy / "samples.jsonl").write_text('{"idx": 0}\n')
    with pytest.raises(ConfigError, match="unknown"):
        check_resume(legacy, A, allow=False)


def _cfg(tmp_path, *overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        return compose("config", overrides=["experiment=core/smoke_long", "wandb.mode=disabled",
                                             f"results_dir={tmp_path}", *overrides])


def test_rows_record_the_code_and_reuse_across_versions(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setattr("ragrepro.runner.git_state", lambda: dict(A))
    execute(_cfg(tmp_path))
    rows = read_csv(tmp_path / "core" / "smoke_long.csv")
    assert [(r["code_version"], r["code_id"], r["git_commit"]) for r in rows] == [
        (A["code_version"], A["code_id"], A["git_commit"])]
    monkeypatch.setattr("ragrepro.runner.git_state", lambda: dict(B))
    with caplog.at_level(logging.WARNING):
        again = execute(_cfg(tmp_path))
    assert again["em_squad"] == pytest.approx(float(rows[0]["em_squad"]))
    assert "Reusing finished run" in caplog.text
    assert A["code_version"] in caplog.text and B["code_version"] in caplog.text
    assert read_csv(tmp_path / "core" / "smoke_long.csv") == rows  # keeps its own version
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        execute(_cfg(tmp_path, "overwrite=true"))
    assert "Reusing" not in caplog.text
    assert read_csv(tmp_path / "core" / "smoke_long.csv")[0]["code_version"] == B["code_version"]


def test_half_finished_run_of_other_code(tmp_path, monkeypatch) -> None:
    """Five records written by code A, then the same command with code B."""
    monkeypatch.setattr("ragrepro.runner.git_state", lambda: dict(A))
    monkeypatch.setattr(faults, "_written", 0)
    monkeypatch.setenv("RAGREPRO_FAULT", "enospc_after_samples=5")
    with pytest.raises(RagreproError, match="disk full"):
        execute(_cfg(tmp_path))
    monkeypatch.delenv("RAGREPRO_FAULT")
    assert len(list((tmp_path / "core" / "smoke_long").glob("tmp_*/samples.jsonl"))) == 1
    monkeypatch.setattr("ragrepro.runner.git_state", lambda: dict(B))
    with pytest.raises(ConfigError, match="allow_code_change=true"):
        execute(_cfg(tmp_path))
    execute(_cfg(tmp_path, "allow_code_change=true"))
    row = read_csv(tmp_path / "core" / "smoke_long.csv")[0]
    assert row["code_version"] == B["code_version"]
    assert row["code_versions_mixed"] == f"{A['code_version']} ; {B['code_version']}"
