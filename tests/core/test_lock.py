"""Pinned revisions (issue 24, item 2): hub revisions resolve to commit hashes through a local
hub cache in huggingface_hub's own layout (built here; no network), files and embedded models
to checksums; `ragrepro lock` writes them; a run under a lock refuses a different id."""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from huggingface_hub import scan_cache_dir, try_to_load_from_cache
from huggingface_hub.file_download import repo_folder_name

from ragrepro import lock
from ragrepro.errors import ConfigError

GPT2_MAIN = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
GPT2_OLD = "11c5a3d5811f50298f278a704980280950aedb10"
WIKITEXT_MAIN = "b08601e04326c79dfdd32d625aee71d232d685c3"


def hub_repo(cache: Path, repo_id: str, commit: str, files: dict[str, bytes],
             repo_type: str = "model", ref: str | None = "main") -> Path:
    """One repo as huggingface_hub caches it: blobs/<hash>, snapshots/<commit>/<file> as a
    relative symlink to its blob, refs/<ref> holding the commit."""
    folder = cache / repo_folder_name(repo_id=repo_id, repo_type=repo_type)
    for name, data in files.items():
        blob = folder / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = folder / "snapshots" / commit / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    if ref:
        (folder / "refs").mkdir(parents=True, exist_ok=True)
        (folder / "refs" / ref).write_text(commit)
    return folder


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    hub_repo(cache, "gpt2", GPT2_OLD, {"config.json": b'{"n_layer": 12, "old": true}'}, ref=None)
    hub_repo(cache, "gpt2", GPT2_MAIN, {"config.json": b'{"n_layer": 12}',
                                        "model.safetensors": b"weights"})
    hub_repo(cache, "Salesforce/wikitext", WIKITEXT_MAIN, {"README.md": b"# wikitext"},
             repo_type="dataset")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_fixture_is_a_hub_cache_huggingface_hub_reads(hub_cache):
    """The fixture's layout is the hub's own: its scanner and file lookup agree with it."""
    info = scan_cache_dir(hub_cache)
    repos = {(r.repo_type, r.repo_id): r for r in info.repos}
    assert set(repos) == {("model", "gpt2"), ("dataset", "Salesforce/wikitext")}
    refs = {rev.commit_hash: set(rev.refs) for rev in repos[("model", "gpt2")].revisions}
    assert refs == {GPT2_MAIN: {"main"}, GPT2_OLD: set()}
    found = try_to_load_from_cache("gpt2", "config.json", cache_dir=hub_cache)
    assert Path(found).parent.name == GPT2_MAIN


def test_hub_revisions_resolve_to_commits_offline(hub_cache):
    assert lock.hub_commit("gpt2", "main") == GPT2_MAIN
    assert lock.hub_commit("gpt2", None) == GPT2_MAIN  # no revision = main
    assert lock.hub_commit("gpt2", GPT2_OLD) == GPT2_OLD  # a commit is its own id
    assert lock.hub_commit("gpt2", "v2") is None  # a tag the cache does not hold
    assert lock.hub_commit("opt-125m", "main") is None  # a repo not downloaded
    assert lock.hub_commit("Salesforce/wikitext", "main", "dataset") == WIKITEXT_MAIN
    assert lock.hub_commit("Salesforce/wikitext", "main", "model") is None
    assert lock.model_id("gpt2", "main") == GPT2_MAIN


def test_files_and_folders_resolve_to_checksums(tmp_path):
    f = tmp_path / "m.gguf"
    f.write_bytes(b"gguf weights")
    assert lock.model_id(str(f), None) == "sha256:" + hashlib.sha256(b"gguf weights").hexdigest()
    d = tmp_path / "folder"
    d.mkdir()
    (d / "model.safetensors").write_bytes(b"w1")
    (d / "config.json").write_text("{}")
    before = lock.model_id(str(d), "main")
    assert before.startswith("sha256-files:")
    (d / "config.json").write_text('{"x": 1}')  # not a weights file: same id
    assert lock.model_id(str(d), "main") == before
    (d / "model.safetensors").write_bytes(b"w2")
    os.utime(d / "model.safetensors", (1, 1))  # a new mtime: the hash memo sees the change
    assert lock.model_id(str(d), "main") != before
    assert lock.model_id(str(tmp_path / "missing.gguf"), None) is None


def test_embedded_model_id_is_its_weights_checksum():
    from ragrepro import assets
    from ragrepro.hashing import hash_file

    expected = "sha256:" + hash_file(assets.EMBEDDED["smollm2"]())
    assert lock.model_id("embedded:smollm2", "q4_1-gguf-0.1.2") == expected


def _cfg(**extra):
    return {"model": {"_target_": lock.LOAD_LM, "source": "gpt2", "revision": "main"},
            "label_model": {"_target_": lock.LOAD_LM, "source": "gpt2", "revision": "main"},
            "dataset": {"_target_": "ragrepro.data.hub.wikitext", "repo": "Salesforce/wikitext",
                        "path": None},
            "retriever": {"_target_": "ragrepro.retrieval.bm25.BM25Retriever", "index": None,
                          "encoder": {"source": "opt-125m", "doc_source": "gpt2",
                                      "revision": "main"}},
            "pipeline": {"lm": {"_target_": lock.LOAD_LM, "source": "ignored", "revision": "x"}},
            **extra}


def test_pins_of_a_config(hub_cache):
    pins = {p.entry: p for p in lock.pins_of(_cfg())}
    assert set(pins) == {"model:gpt2@main", "model:opt-125m@main",
                         "dataset:Salesforce/wikitext@main"}
    assert pins["model:gpt2@main"].keys == ("model.source", "label_model.source",
                                            "retriever.encoder.doc_source")
    assert pins["model:gpt2@main"].resolved == GPT2_MAIN
    assert pins["model:opt-125m@main"].resolved is None  # not cached: checked when it loads
    assert pins["dataset:Salesforce/wikitext@main"].resolved == WIKITEXT_MAIN
    local = _cfg(dataset={"_target_": "ragrepro.data.hub.wikitext", "repo": "x/y", "path": "a"})
    assert "dataset:x/y@main" not in {p.entry for p in lock.pins_of(local)}  # a local file
    fields = lock.row_fields(lock.pins_of(_cfg()))
    assert fields == {"model_revision_resolved": GPT2_MAIN, "dataset_revision": "main",
                      "dataset_revision_resolved": WIKITEXT_MAIN}


def test_prebuilt_index_is_pinned_by_name(monkeypatch):
    monkeypatch.setattr(lock, "index_id", lambda name: f"md5:{name}-md5")
    cfg = {"retriever": {"_target_": "ragrepro.retrieval.bm25.BM25Retriever",
                         "index": "wikipedia-dpr"}}
    (pin,) = lock.pins_of(cfg)
    assert (pin.entry, pin.resolved, pin.keys) == (
        "index:wikipedia-dpr@prebuilt", "md5:wikipedia-dpr-md5", ("retriever.index",))
    assert lock.row_fields([pin]) == {"index_revision_resolved": "md5:wikipedia-dpr-md5"}


def _lock_file(path: Path, **pins: str) -> Path:
    """A lock file pinning entry (kind:name@revision) -> id, written by the real writer."""
    entries = []
    for entry, resolved in pins.items():
        kind, rest = entry.split(":", 1)
        name, requested = rest.rsplit("@", 1)
        entries.append(lock.Pin(kind, name, requested, resolved))
    path.write_text(lock.lock_text(entries, ["test"]))
    return path


def test_enforce_refuses_a_different_id_naming_both(hub_cache, tmp_path, caplog):
    stale = lock.read_lock(_lock_file(tmp_path / "l.yaml", **{"model:gpt2@main": GPT2_OLD}))
    pins = lock.pins_of(_cfg())
    with pytest.raises(ConfigError) as err:
        lock.enforce(pins, stale, allow=False)
    text = str(err.value)
    assert GPT2_MAIN in text and GPT2_OLD in text and "model.source" in text
    assert "allow_unlocked=true" in text
    with caplog.at_level(logging.WARNING, logger="ragrepro.lock"):
        lock.enforce(pins, stale, allow=True)  # allowed: warned, not refused
    assert "unlocked revisions" in caplog.text and GPT2_OLD in caplog.text
    assert "not pinned" in caplog.text  # opt-125m and wikitext are not in this lock
    current = lock.read_lock(_lock_file(tmp_path / "ok.yaml", **{"model:gpt2@main": GPT2_MAIN}))
    lock.enforce(pins, current, allow=False)  # the same id passes


def test_find_lock(tmp_path):
    assert lock.find_lock("auto", cwd=tmp_path) is None  # no file: no lock
    assert lock.find_lock(None) is None
    _lock_file(tmp_path / lock.DEFAULT_LOCK, **{"model:gpt2@main": GPT2_MAIN})
    assert lock.find_lock("auto", cwd=tmp_path).pins == {"model:gpt2@main": GPT2_MAIN}
    with pytest.raises(ConfigError, match="lock_file='nope.yaml' does not exist"):
        lock.find_lock("nope.yaml")
    (tmp_path / "bad.yaml").write_text("pins: [1, 2]\n")
    with pytest.raises(ConfigError, match="not a version-1 ragrepro lock file"):
        lock.find_lock(str(tmp_path / "bad.yaml"))


def test_a_loader_is_refused_an_id_that_moved(hub_cache, tmp_path):
    stale = lock.read_lock(_lock_file(tmp_path / "l.yaml", **{"model:gpt2@main": GPT2_OLD}))
    with lock.active(stale, allow=False), pytest.raises(ConfigError, match=GPT2_OLD):
        lock.check_loaded("model", "gpt2", "main", GPT2_MAIN, device="cpu")
    with lock.active(None, allow=False):
        lock.check_loaded("model", "gpt2", None, GPT2_MAIN, device="cpu")
        assert lock.loaded() == {"model:gpt2@main": {"resolved": GPT2_MAIN, "device": "cpu"}}


def test_hub_dataset_loader_records_and_checks_its_commit(hub_cache, tmp_path, monkeypatch):
    import datasets

    from ragrepro.data import hub

    calls = []
    monkeypatch.setattr(datasets, "load_dataset",
                        lambda *a, **k: calls.append((a, k)) or [{"text": "a"}])
    with lock.active(None, allow=False):
        hub._load_hub_rows("Salesforce/wikitext", "wikitext-103-v1", "test", "x", "main")
        assert lock.loaded()["dataset:Salesforce/wikitext@main"]["resolved"] == WIKITEXT_MAIN
    assert calls[0][1]["revision"] == "main"  # the revision reaches datasets
    stale = lock.read_lock(_lock_file(tmp_path / "l.yaml",
                                      **{"dataset:Salesforce/wikitext@main": "f" * 40}))
    with lock.active(stale, allow=False), pytest.raises(ConfigError, match="f" * 40):
        hub._load_hub_rows("Salesforce/wikitext", "wikitext-103-v1", "test", "x", None)
    arrow = SimpleNamespace(cache_files=[{"filename": f"/c/org___ds/cfg/0.0.0/{'c' * 40}/t.arrow"}])
    assert hub.commit_of_rows(arrow) == "c" * 40


def test_lock_command_writes_every_pin(hub_cache, tmp_path, capsys):
    out = tmp_path / "ragrepro-lock.yaml"
    lock.main(["experiment=core/smoke", "model=gpt2", "-o", str(out)])
    data = yaml.safe_load(out.read_text())
    assert data["configs"] == ["experiment=core/smoke", "model=gpt2"]
    assert data["pins"]["model:gpt2@main"]["resolved"] == GPT2_MAIN
    assert lock.read_lock(out).pins == {"model:gpt2@main": GPT2_MAIN}
    missing = tmp_path / "missing.yaml"
    with pytest.raises(SystemExit) as exit_:
        lock.main(["experiment=core/smoke", "model=opt-125m", "-o", str(missing)])
    assert exit_.value.code == 2 and not missing.exists()
    lock.main(["experiment=core/smoke", "model=opt-125m", "-o", str(missing), "--partial"])
    assert yaml.safe_load(missing.read_text())["pins"] == {}


def test_lock_command_covers_a_sweep(tmp_path):
    out = tmp_path / "sweep.yaml"
    lock.main(["-m", "experiment=ralm/table1", "-o", str(out)])  # model: smollm2, gemma3
    pins = yaml.safe_load(out.read_text())["pins"]
    assert {p["name"] for p in pins.values()} == {"embedded:smollm2", "embedded:gemma3",
                                                  "embedded:minilm"}
    assert all(p["resolved"].startswith("sha256") for p in pins.values())
    smol = pins["model:embedded:smollm2@q4_1-gguf-0.1.2"]
    assert smol["keys"] == ["label_model.source", "model.source"]


def test_sweep_of_crosses_command_line_and_experiment_sweeps():
    fixed, cells = lock.sweep_of(["experiment=x", "model=a,b", "seed=0"],
                                 {"model": "c,d", "ralm/rerank": "none,first"})
    assert fixed == ["experiment=x", "seed=0"]
    assert cells == [["ralm/rerank=none", "model=a"], ["ralm/rerank=none", "model=b"],
                     ["ralm/rerank=first", "model=a"], ["ralm/rerank=first", "model=b"]]
    assert lock.sweep_of(["experiment=x", "model=e"], {"model": "c,d"}) == (
        ["experiment=x", "model=e"], [[]])  # a fixed key replaces the experiment's sweep
    assert lock.sweep_of(["experiment=x"], None) == (["experiment=x"], [[]])


def test_lock_command_covers_a_command_line_sweep(hub_cache, tmp_path):
    out = tmp_path / "l.yaml"
    lock.main(["-m", "experiment=core/smoke", "model=gpt2,opt-125m", "-o", str(out),
               "--partial"])
    data = yaml.safe_load(out.read_text())
    assert data["multirun"] is True
    assert set(data["pins"]) == {"model:gpt2@main"}  # opt-125m is not cached: left out


# ---- a run under a lock -------------------------------------------------------------------
def _execute(results: Path, *overrides: str):
    from hydra import compose, initialize_config_dir

    from ragrepro.paths import CONF_DIR
    from ragrepro.runner import execute

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=core/smoke", "model=gpt2",
                                           f"results_dir={results}", *overrides])
    return execute(cfg)


def _row(results: Path) -> dict:
    from ragrepro.tracking import read_csv

    (row,) = read_csv(results / "core" / "smoke.csv")
    return row


def test_run_under_a_lock(hub_cache, tmp_path, monkeypatch, caplog):
    """auto finds ragrepro-lock.yaml in the working folder; a different cached commit is
    refused before the run starts; allow_unlocked lets it run and the row says what it used;
    a finished run whose recorded commit differs is refused on reuse too."""
    results = tmp_path / "res"
    monkeypatch.chdir(tmp_path)
    _lock_file(tmp_path / lock.DEFAULT_LOCK, **{"model:gpt2@main": GPT2_OLD})
    with pytest.raises(ConfigError) as err:
        _execute(results)
    assert "model.source" in str(err.value) and GPT2_OLD in str(err.value) \
        and GPT2_MAIN in str(err.value)
    assert not (results / "core").exists()  # refused before anything started
    with caplog.at_level(logging.WARNING):
        assert _execute(results, "allow_unlocked=true")["em_squad"] == 0.5
    assert "unlocked revisions" in caplog.text
    row = _row(results)
    assert (row["model_revision"], row["model_revision_resolved"]) == ("main", GPT2_MAIN)
    assert row["device"] == "cpu"
    with pytest.raises(ConfigError, match=GPT2_OLD):
        _execute(results)  # finished, but computed with a commit the lock does not pin
    _execute(results, "lock_file=null")  # no lock: reused
    _lock_file(tmp_path / lock.DEFAULT_LOCK, **{"model:gpt2@main": GPT2_MAIN})
    _execute(results)  # the recorded commit is the locked one


def test_an_id_that_moves_during_the_run_is_not_committed(hub_cache, tmp_path, monkeypatch):
    """The cache held no gpt2 when the run started (nothing to refuse yet); the run
    'downloads' a commit the lock does not pin: the run is refused and stays unfinished."""
    from ragrepro import smoke

    results = tmp_path / "res"
    lock_path = _lock_file(tmp_path / "l.yaml", **{"model:gpt2@main": GPT2_OLD})
    ref = hub_cache / "models--gpt2" / "refs" / "main"
    ref.unlink()
    real = smoke.run

    def downloading(**kw):
        ref.write_text(GPT2_MAIN)
        return real(**kw)

    monkeypatch.setattr(smoke, "run", downloading)
    with pytest.raises(ConfigError, match=GPT2_MAIN):
        _execute(results, f"lock_file={lock_path}")
    assert not list((results / "core" / "smoke").glob("[!t]*/metrics.json"))
    assert not (results / "core" / "smoke.csv").exists()


def test_reuse_across_device_types_is_announced(hub_cache, tmp_path, caplog):
    results = tmp_path / "res"
    _execute(results, "lock_file=null")
    (metrics,) = (results / "core" / "smoke").glob("*/metrics.json")
    data = json.loads(metrics.read_text())
    assert data["settings"]["device"] == "cpu" and data["metadata"]["pins"] == {
        "model:gpt2@main": GPT2_MAIN}
    with caplog.at_level(logging.WARNING, logger="ragrepro.runner"):
        _execute(results, "lock_file=null")
    assert "computed on" not in caplog.text  # same device type: silent
    data["settings"]["device"] = "cuda"
    metrics.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="ragrepro.runner"):
        _execute(results, "lock_file=null")
    assert "computed on cuda; this machine runs it on cpu" in caplog.text


def test_device_announcement_rule(caplog):
    from ragrepro.runner import announce_device_reuse

    with caplog.at_level(logging.WARNING, logger="ragrepro.runner"):
        assert not announce_device_reuse("r", {"device": "cpu"}, "cpu")
        assert not announce_device_reuse("r", {}, "cpu")  # an old row, on a CPU as before
        assert announce_device_reuse("r", {}, "cuda")
        assert announce_device_reuse("r", {"device": "cuda"}, "cpu")
    assert caplog.text.count("Reusing finished run r") == 2
