"""Pinned revisions: what a config loads, resolved to immutable ids, and the lock file.

A config names models, datasets and indexes by a movable revision (`revision: main`). Each is
resolved without network to an id that cannot move:

- a hub model or dataset: the commit hash its revision points to in the local hub cache
  (huggingface_hub's layout: `<cache>/models--org--name/refs/<revision>` holds the hash);
- a local or GGUF file, an embedded model (`embedded:<name>`): `sha256:<hex>` of the weights
  file (a folder: `sha256-files:<hex>`, a hash of its weight files' checksums);
- a pyserini prebuilt index: `md5:<hex>`, the archive checksum pyserini verifies.

Every row records the resolved ids (`model_revision_resolved`, ...). `ragrepro lock` writes
them for every cell of a config or sweep to `ragrepro-lock.yaml`; a run under that file
(`lock_file`: `auto` finds it in the working directory) refuses a different id unless
`allow_unlocked=true` (docs/running.md, "Revisions, lock files and devices").
"""
from __future__ import annotations

import argparse
import itertools
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from huggingface_hub import constants
from huggingface_hub.file_download import repo_folder_name
from hydra import initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from . import assets, sources
from .configcheck import compose_cell, compose_checked
from .errors import ConfigError, RagreproError
from .hashing import file_hash_cached, hash_obj
from .paths import CONF_DIR
from .retrieval.jvm import start_jvm
from .sweep import sweep_cells

log = logging.getLogger(__name__)

DEFAULT_LOCK = "ragrepro-lock.yaml"  # not *.lock: .gitignore leaves those out, a lock is committed
LOCK_VERSION = 1
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_WEIGHTS = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".ckpt")
# Never load anything; `pipeline` only interpolates nodes found where they live.
_SKIP = frozenset({"hydra", "wandb", "resources", "fault", "pipeline"})
LOAD_LM = "ragrepro.models.load_lm"


@dataclass(frozen=True)
class Pin:
    """One thing a config loads: `kind` model|dataset|index, `name` (hub id, path,
    embedded:<name>, index name), the `requested` revision and its `resolved` id (None when
    it cannot be resolved offline: not in the local cache yet)."""

    kind: str
    name: str
    requested: str
    resolved: str | None
    keys: tuple[str, ...] = ()

    @property
    def entry(self) -> str:
        return f"{self.kind}:{self.name}@{self.requested}"


# ---- resolution ---------------------------------------------------------------------------
def hub_cache_dir() -> Path:
    """The hub cache, read from the environment at call time (HF_HUB_CACHE, HF_HOME/hub)."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    return Path(constants.HF_HUB_CACHE)


def is_commit(revision: str | None) -> bool:
    return bool(revision and _COMMIT.match(revision))


def hub_commit(repo_id: str, revision: str | None, repo_type: str = "model") -> str | None:
    """The commit hash `revision` names in the local hub cache, or None when it is not
    cached. A 40-hex revision is already a commit."""
    revision = revision or "main"
    if is_commit(revision):
        return revision
    ref = hub_cache_dir() / repo_folder_name(repo_id=repo_id, repo_type=repo_type) / "refs" / revision
    if not ref.is_file():
        return None
    commit = ref.read_text(encoding="utf-8").strip()
    return commit if is_commit(commit) else None


def file_id(path: Path) -> str:
    """`sha256:<hex>` of a file; of a folder, a hash over its weight files' checksums."""
    if path.is_file():
        return f"sha256:{file_hash_cached(path)}"
    files = sorted(p for p in path.rglob("*") if p.is_file())
    weights = [p for p in files if p.suffix in _WEIGHTS] or files
    return "sha256-files:" + hash_obj([(str(p.relative_to(path)), file_hash_cached(p))
                                       for p in weights], length=64)


def model_id(source: str, revision: str | None) -> str | None:
    """The immutable id of a model source (see the module docstring); None if not cached."""
    standin = sources.current().model_source(source)
    if standin is not None:
        return file_id(Path(standin)) if Path(standin).exists() else None
    if source.startswith("embedded:"):
        getter = assets.EMBEDDED.get(source.split(":", 1)[1])
        if getter is None:
            return None
        try:
            path = getter()
        except RagreproError:  # an opt-in package not installed, or its parts incomplete
            return None
        return file_id(path) if path.exists() else None
    path = Path(source).expanduser()
    if path.exists():
        return file_id(path)
    if source.startswith((".", "/", "~")) or path.suffix == ".gguf":
        return None
    return hub_commit(source, revision, "model")


def index_id(name: str) -> str | None:
    """`md5:<hex>` of a pyserini prebuilt index (fixed per pyserini release), else None."""
    standin = sources.current().prebuilt_index(name)
    if standin is not None:
        return file_id(standin) if standin.exists() else None
    try:
        start_jvm()  # pyserini 1.6 reads its index table from Anserini (Java)
        # deferred: pyserini (optional, needs the JVM booted just above)
        from pyserini.prebuilt_index_info import TF_INDEX_INFO
    except Exception as e:  # noqa: BLE001 - pyserini missing or its JVM failing to start
        log.warning("Cannot resolve prebuilt index %s: pyserini unavailable (%s)", name, e)
        return None
    md5 = (TF_INDEX_INFO.get(name) or {}).get("md5")
    return f"md5:{md5}" if md5 else None


# ---- what a config loads ------------------------------------------------------------------
def _nodes(node: Any, prefix: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield prefix, node
        for k, v in node.items():
            if not prefix and k in _SKIP:
                continue
            yield from _nodes(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _nodes(v, f"{prefix}.{i}")


def _wanted(key: str, node: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """(kind, name, requested, config key) of what one config node loads."""
    target = str(node.get("_target_") or "")
    if target == LOAD_LM or ("source" in node and "revision" in node):
        for field_ in ("source", "doc_source"):
            if isinstance(node.get(field_), str):
                yield "model", node[field_], str(node.get("revision") or "main"), f"{key}.{field_}"
    if target.startswith("ragrepro.data.hub.") and node.get("repo") and not node.get("path"):
        yield "dataset", str(node["repo"]), str(node.get("revision") or "main"), f"{key}.repo"
    index = node.get("index")
    if target.endswith("bm25.BM25Retriever") and isinstance(index, str) \
            and not index.startswith((".", "/", "~")) and not Path(index).expanduser().exists():
        yield "index", index, "prebuilt", f"{key}.index"


def resolve(kind: str, name: str, requested: str) -> str | None:
    if kind == "model":
        return model_id(name, requested)
    if kind == "dataset":
        return hub_commit(name, requested, "dataset")
    return index_id(name)


def pins_of(resolved_cfg: Mapping[str, Any]) -> list[Pin]:
    """Every model, hub dataset and prebuilt index a resolved config names, resolved from the
    local caches (no network), one Pin per distinct (kind, name, revision)."""
    found: dict[tuple[str, str, str], list[str]] = {}
    for key, node in _nodes(dict(resolved_cfg)):
        for kind, name, requested, where in _wanted(key, node):
            found.setdefault((kind, name, requested), []).append(where)
    return [Pin(kind, name, req, resolve(kind, name, req), tuple(keys))
            for (kind, name, req), keys in found.items()]


def row_fields(pins: list[Pin]) -> dict[str, Any]:
    """The columns every row carries: the model's, dataset's and index's resolved ids."""
    out: dict[str, Any] = {}
    for pin in pins:
        if "model.source" in pin.keys:
            out["model_revision_resolved"] = pin.resolved
        elif "dataset.repo" in pin.keys:
            out["dataset_revision"] = pin.requested
            out["dataset_revision_resolved"] = pin.resolved
        elif pin.kind == "index" and "retriever.index" in pin.keys:
            out["index_revision_resolved"] = pin.resolved
    return out


# ---- the lock file ------------------------------------------------------------------------
@dataclass
class Lock:
    """A read lock file: entry (`kind:name@revision`) -> resolved id."""

    path: Path
    pins: dict[str, str] = field(default_factory=dict)


def lock_text(pins: list[Pin], configs: list[str], multirun: bool = False) -> str:
    body = {"version": LOCK_VERSION, "configs": configs, "multirun": multirun,
            "pins": {p.entry: {"kind": p.kind, "name": p.name, "requested": p.requested,
                               "resolved": p.resolved, "keys": sorted(p.keys)}
                     for p in sorted(pins, key=lambda p: p.entry)}}
    head = ("# Written by `ragrepro lock`: the immutable id of every model, dataset and prebuilt\n"
            "# index these configs load. A run in this folder refuses a different id\n"
            "# (allow_unlocked=true lets it through). Regenerate with the same command.\n")
    return head + yaml.safe_dump(body, sort_keys=False, width=100)


def read_lock(path: Path) -> Lock:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"lock_file={str(path)!r} cannot be read ({e}); regenerate it with "
                          f"`ragrepro lock` or set lock_file=null.") from e
    if not isinstance(data, dict) or data.get("version") != LOCK_VERSION \
            or not isinstance(data.get("pins"), dict):
        raise ConfigError(f"lock_file={str(path)!r} is not a version-{LOCK_VERSION} ragrepro "
                          f"lock file; regenerate it with `ragrepro lock`.")
    return Lock(path, {k: v.get("resolved") for k, v in data["pins"].items()
                       if isinstance(v, dict) and v.get("resolved")})


def find_lock(setting: Any, cwd: Path | None = None) -> Lock | None:
    """The lock a run obeys: `auto` = ragrepro-lock.yaml in the working directory if present,
    null/false = none, else a path (which must exist)."""
    if setting in (None, False, "", "null", "none"):
        return None
    if setting == "auto":
        path = (cwd or Path.cwd()) / DEFAULT_LOCK
        return read_lock(path) if path.is_file() else None
    path = Path(str(setting)).expanduser()
    if not path.is_file():
        raise ConfigError(f"lock_file={str(setting)!r} does not exist; write it with "
                          f"`ragrepro lock <overrides> -o {setting}` or set lock_file=null.")
    return read_lock(path)


def mismatches(pins: list[Pin], lock: Lock) -> list[str]:
    """One message per pin whose resolved id differs from the lock's (unresolved pins are
    checked again when they load)."""
    out = []
    for pin in pins:
        locked_id = lock.pins.get(pin.entry)
        if pin.resolved and locked_id and pin.resolved != locked_id:
            out.append(f"{', '.join(pin.keys) or pin.kind} ({pin.entry}) resolves to "
                       f"{pin.resolved} but {lock.path} pins {locked_id}")
    return out


def enforce(pins: list[Pin], lock: Lock | None, allow: bool) -> None:
    """Refuse (ConfigError) ids that differ from the lock, unless `allow` (then warn)."""
    if lock is None:
        return
    for pin in pins:
        if pin.entry not in lock.pins:
            log.warning("%s (%s) is not pinned by %s; add it with `ragrepro lock`.",
                        ", ".join(pin.keys) or pin.kind, pin.entry, lock.path)
    _refuse(mismatches(pins, lock), allow)


def refuse_moved(pins: list[Pin], lock: Lock | None, allow: bool) -> None:
    """enforce() without the warnings for unpinned items: the check after a run, of what it
    may have downloaded while running (before its results are committed)."""
    if lock is not None:
        _refuse(mismatches(pins, lock), allow)


def _refuse(bad: list[str], allow: bool) -> None:
    if not bad:
        return
    text = "; ".join(bad)
    if allow:
        log.warning("Running with unlocked revisions (allow_unlocked=true): %s", text)
        return
    raise ConfigError(f"Revision differs from the lock file: {text}. Load the locked one (set "
                      f"the revision to the locked commit, or restore the cache), regenerate the "
                      f"lock with `ragrepro lock`, or set allow_unlocked=true.")


def recorded_pins(settings: Mapping[str, Any], cfg_pins: list[Pin]) -> list[Pin]:
    """The ids a finished run recorded in its row, as Pins of this config's entries."""
    by_column = {"model_revision_resolved": "model.source",
                 "dataset_revision_resolved": "dataset.repo",
                 "index_revision_resolved": "retriever.index"}
    out = []
    for column, key in by_column.items():
        pin = next((p for p in cfg_pins if key in p.keys), None)
        if pin is not None and settings.get(column):
            out.append(Pin(pin.kind, pin.name, pin.requested, str(settings[column]), pin.keys))
    return out


# ---- the lock a loader checks against (set by the runner for one run) ---------------------
_ACTIVE: list[tuple[Lock, bool]] = []
_LOADED: dict[str, dict[str, Any]] = {}


@contextmanager
def active(lock: Lock | None, allow: bool) -> Iterator[None]:
    """One run's loading: what loaders report starts empty (loaded()), and they check it
    against `lock` (check_loaded) while this is open."""
    _LOADED.clear()
    if lock is None:
        yield
        return
    _ACTIVE.append((lock, allow))
    try:
        yield
    finally:
        _ACTIVE.pop()


def check_loaded(kind: str, name: str, requested: str | None, resolved: str | None,
                 **facts: Any) -> None:
    """Called by a loader with what it loaded: remembered for the row (loaded()), and refused
    when the active lock pins another id (a download during the run may move `main`)."""
    pin = Pin(kind, name, str(requested or "main"), resolved)
    _LOADED[pin.entry] = {"resolved": resolved, **facts}
    if _ACTIVE and resolved:
        lock, allow = _ACTIVE[-1]
        _refuse(mismatches([Pin(kind, name, pin.requested, resolved, (f"loaded {kind}",))],
                           lock), allow)


def loaded() -> dict[str, dict[str, Any]]:
    """entry -> {resolved, device, attn_implementation, ...} of what this process loaded."""
    return dict(_LOADED)


# ---- `ragrepro lock` ----------------------------------------------------------------------
def sweep_of(overrides: list[str], sweeper_params: Mapping[str, Any] | None
             ) -> tuple[list[str], list[list[str]]]:
    """(fixed overrides, cells): the command line's own sweeps (`model=a,b`) crossed with the
    experiment's `hydra.sweeper.params` (a key on the command line replaces the latter's)."""
    parsed = OverridesParser.create().parse_overrides(overrides)
    fixed = [o.input_line for o in parsed if not o.is_sweep_override()]
    swept = {o.get_key_element(): [f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()]
             for o in parsed if o.is_sweep_override()}
    given = set(swept) | {o.get_key_element().lstrip("+~") for o in parsed}
    params = {k: v for k, v in (sweeper_params or {}).items() if k not in given}
    cells = [[*base, *extra] for base in sweep_cells(params)
             for extra in itertools.product(*swept.values())]
    return fixed, cells


def lock_pins(overrides: list[str], multirun: bool) -> list[Pin]:
    """The pins of every cell of a config (or of its sweep with multirun)."""
    merged: dict[str, Pin] = {}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        fixed, cells = overrides, [[]]
        if multirun:
            plain = sweep_of(overrides, None)[0]
            full = compose_checked(plain, return_hydra_config=True)
            params = OmegaConf.select(full, "hydra.sweeper.params", default=None)
            fixed, cells = sweep_of(overrides, OmegaConf.to_container(params)
                                    if params is not None else None)  # type: ignore[arg-type]
        for cell in cells:
            cfg = OmegaConf.to_container(compose_cell([*fixed, *cell]), resolve=True)
            for pin in pins_of(cfg):  # type: ignore[arg-type]
                old = merged.get(pin.entry)
                keys = tuple(sorted(set(pin.keys) | set(old.keys if old else ())))
                merged[pin.entry] = Pin(pin.kind, pin.name, pin.requested, pin.resolved, keys)
    return list(merged.values())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="ragrepro lock", description=(
        "Write the immutable id (commit hash, checksum) of every model, dataset and prebuilt "
        "index a config loads, resolved from the local caches without network."))
    ap.add_argument("-m", "--multirun", action="store_true", help="every cell of the sweep")
    ap.add_argument("-o", "--output", default=DEFAULT_LOCK, help=f"default: {DEFAULT_LOCK}")
    ap.add_argument("--partial", action="store_true",
                    help="write the lock even when some items are not in the local cache")
    ap.add_argument("overrides", nargs="*", help="experiment=... and other overrides")
    args = ap.parse_args(argv)
    pins = lock_pins(args.overrides, args.multirun)
    missing = [p for p in pins if p.resolved is None]
    for p in missing:
        log.error("Not in the local cache: %s (%s). Download it once (run the config with "
                  "HF_HUB_OFFLINE=0, or `huggingface-cli download %s`).", p.entry,
                  ", ".join(p.keys), p.name)
    if missing and not args.partial:
        log.error("Nothing written: %d item(s) cannot be resolved offline; --partial writes "
                  "the others.", len(missing))
        raise SystemExit(2)
    out = Path(args.output)
    out.write_text(lock_text([p for p in pins if p.resolved], args.overrides, args.multirun),
                   encoding="utf-8")
    sys.stdout.write(f"Wrote {out}: {len(pins) - len(missing)} pinned item(s)\n")
