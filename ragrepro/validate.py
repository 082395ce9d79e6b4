"""Type and range of every setting, checked when a run starts, before anything loads.

A typed settings node (any config node whose `_target_` is a dataclass, e.g. `ralm:` ->
ralm.settings.RalmSettings) is checked against the dataclass's field types and the range a
method package declares per field in its own settings module:

    stride: int = field(metadata=limits(min=1))
    k: int | str = field(metadata=limits(min=1, choices=("auto",)))

so the core learns no method's key names. The root keys of conf/config.yaml (limit, seed,
batch_size, device, ...) are declared here, in `RootKeys`. A wrong value is a ConfigError
(exit code 2) naming the key, the value and what is allowed. A length a model reads
declares that model's config node (`max_length: int = field(metadata=limits(min=2,
positions="model"))`): the value is checked against the model's positions, read from its
files without loading it (ragrepro.positions).
"""
from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.util
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from .errors import ConfigError, did_you_mean
from .positions import model_positions

RANGE = "ragrepro.range"  # the dataclass field metadata key read here
HYDRA_KEYS = frozenset({"_target_", "_partial_", "_recursive_", "_convert_", "_args_"})


@dataclass(frozen=True)
class Range:
    """What a field allows beyond its type: numeric bounds (`min`, `max` inclusive, `above`
    exclusive), the words a field that takes a string may be, a regular expression for
    strings, `says`: the message's wording, where the default one would be unclear, and
    `schema`: for a mapping field, the dataclass whose fields its keys are (all optional);
    `positions`: the config node of the model that reads this many tokens (`model`, or
    `.encoder` relative to the settings node): the value may not exceed its positions."""

    min: float | None = None
    max: float | None = None
    above: float | None = None
    choices: tuple[str, ...] | None = None
    pattern: str | None = None
    says: str | None = None
    schema: type | None = None
    positions: str | None = None

    def bound(self) -> str:
        """'>= 1', '> 0', 'in 0..1', or '' when the numbers are unbounded."""
        low = f"> {_num(self.above)}" if self.above is not None else (
            f">= {_num(self.min)}" if self.min is not None else "")
        if self.max is None:
            return low
        if self.min is not None and self.above is None:
            return f"in {_num(self.min)}..{_num(self.max)}"
        return f"{low} and <= {_num(self.max)}" if low else f"<= {_num(self.max)}"

    def holds(self, value: float) -> bool:
        return ((self.min is None or value >= self.min) and (self.max is None or value <= self.max)
                and (self.above is None or value > self.above))


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def limits(min: float | None = None, max: float | None = None,
           above: float | None = None, choices: Sequence[str] | None = None,
           pattern: str | None = None, says: str | None = None,
           schema: type | None = None, positions: str | None = None) -> dict[str, Range]:
    """Field metadata: `x: int = field(metadata=limits(min=1))`."""
    return {RANGE: Range(min, max, above, tuple(choices) if choices else None, pattern, says,
                         schema, positions)}


# -- the root keys of conf/config.yaml (core settings; methods declare their own) ---------------
DEVICE = r"auto|cpu|mps|cuda(:\d+)?"
AUTO = ("auto",)


@dataclass(frozen=True)
class Resources:
    gpus: int | str = field(metadata=limits(min=0, choices=AUTO))
    cpus: int | str = field(metadata=limits(min=1, choices=AUTO))
    mem_gb: int | str = field(metadata=limits(min=1, choices=AUTO))
    timeout_min: int | str = field(metadata=limits(min=1, choices=AUTO))
    gpu_mem_gb: float = field(metadata=limits(min=1))


@dataclass(frozen=True)
class Wandb:
    mode: str = field(metadata=limits(choices=("online", "offline", "disabled", "auto")))
    project: str
    entity: str | None
    group: str | None
    tags: Sequence[str]


@dataclass(frozen=True)
class Writer:
    """conf/config.yaml `writer:` (ragrepro/runlock.py); stale_s >= 2 * heartbeat_s is
    checked where the lock is taken (runlock.WriterSettings.of)."""

    wait_s: float = field(metadata=limits(min=0, max=7 * 24 * 3600))
    heartbeat_s: float = field(metadata=limits(above=0, max=3600))
    stale_s: float = field(metadata=limits(above=0, max=7 * 24 * 3600))


@dataclass(frozen=True)
class RootKeys:
    """conf/config.yaml's own keys; `dtype`'s choices are checked by configcheck."""

    name: str
    method: str
    scale: str = field(metadata=limits(choices=("mini", "paper")))
    seed: int = field(metadata=limits(min=0, max=2**32 - 1))  # numpy's seed range
    limit: int | None = field(metadata=limits(
        min=1, says="a positive number of examples, or null"))
    dtype: str
    device: str = field(metadata=limits(pattern=DEVICE,
                                        says="auto, cpu, cuda, cuda:<index> or mps"))
    batch_size: int = field(metadata=limits(min=1))
    # perplexity pipelines: fewer scored tokens are refused, fewer than 10x warned about
    min_scored_tokens: int = field(metadata=limits(min=1))
    overwrite: bool
    allow_code_change: bool
    results_dir: str | None
    sweep_metric: str | None
    resources: Resources
    wandb: Wandb
    writer: Writer


# -- checking one value ---------------------------------------------------------------------
_WORDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
          type(None): "null"}


def _kinds(hint: Any) -> tuple[Any, ...]:
    """The members of a union type, or the type itself."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return typing.get_args(hint)
    return (hint,)


def _is_kind(value: Any, kind: Any) -> bool | None:
    """Whether value has this type; None when the type is not one checked here."""
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in (str, type(None)):
        return isinstance(value, kind)
    origin = typing.get_origin(kind) or kind
    if isinstance(origin, type) and issubclass(origin, Mapping) or is_dataclass(kind):
        return isinstance(value, Mapping)
    if isinstance(origin, type) and issubclass(origin, Sequence):
        return isinstance(value, Sequence) and not isinstance(value, str)
    return None  # Any, callables, ...: not checked


def allowed(hint: Any, rng: Range | None) -> str:
    """How a message words what a field takes, e.g. 'an integer >= 1, or auto'."""
    if rng is not None and rng.says:
        return rng.says
    words = []
    for kind in _kinds(hint):
        if kind is str and rng is not None and rng.choices:
            words.append(("one of " if len(rng.choices) > 1 else "") + ", ".join(rng.choices))
        elif kind is str and rng is not None and rng.pattern:
            words.append(f"a string matching {rng.pattern}")
        elif kind in (int, float) and rng is not None and rng.bound():
            words.append(f"{_WORDS[kind]} {rng.bound()}")
        else:
            words.append(_WORDS.get(kind) or getattr(kind, "__name__", str(kind)))
    return ", or ".join(words)


def value_error(key: str, value: Any, hint: Any, rng: Range | None) -> str | None:
    """Why `key=value` is refused, or None when it is allowed."""
    if isinstance(value, str) and value == "???":
        return None  # a missing mandatory value: Hydra names it when the node is built
    kinds = _kinds(hint)
    verdicts = [_is_kind(value, k) for k in kinds]
    if None in verdicts and not any(verdicts):
        return None  # a type this checker does not judge
    if not any(verdicts):
        return _refusal(key, value, hint, rng)
    if rng is None:
        return None
    ok = True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ok = rng.holds(value)
    elif isinstance(value, str) and rng.choices:
        ok = value in rng.choices
    elif isinstance(value, str) and rng.pattern:
        ok = re.fullmatch(rng.pattern, value) is not None
    return None if ok else _refusal(key, value, hint, rng)


def _refusal(key: str, value: Any, hint: Any, rng: Range | None) -> str:
    shown = ({True: "true", False: "false"}[value] if isinstance(value, bool) else "null"
             if value is None else repr(value) if isinstance(value, str) else value)
    close = did_you_mean(value, rng.choices) if isinstance(value, str) and rng and rng.choices \
        else ""
    return f"{key}={shown} must be {allowed(hint, rng)}.{close}"


# -- checking a node against a dataclass -----------------------------------------------------
def _hints(cls: type) -> dict[str, Any]:
    """Field types; a name the module imports only for type checking stays unchecked."""
    module = vars(sys.modules[cls.__module__])
    out: dict[str, Any] = {}
    for f in fields(cls):
        try:
            out[f.name] = eval(f.type, module) if isinstance(f.type, str) else f.type
        except Exception:  # noqa: BLE001 - an unresolvable annotation is simply not checked
            out[f.name] = Any
    return out


def _required(f: Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def node_errors(prefix: str, node: Mapping[str, Any], cls: type, partial: bool = False,
                strict: bool = True) -> Iterator[str]:
    """Every refused key of one settings node (resolved to plain values) under `cls`.
    `partial`: missing fields are fine; not `strict`: so are unknown keys (the root and its
    plain nodes, e.g. wandb.* options handed to W&B as they are)."""
    hints = _hints(cls)
    by_name = {f.name: f for f in fields(cls)}
    for key in node if strict else ():
        if key not in by_name and key not in HYDRA_KEYS:
            yield (f"{prefix}{key} is not a setting of {cls.__name__}."
                   f"{did_you_mean(str(key), by_name)} Its settings: {', '.join(by_name)}.")
    for name, f in by_name.items():
        if name not in node:
            if _required(f) and not partial:
                yield f"{prefix}{name} is missing: {cls.__name__} needs it ({allowed(hints[name], None)})."
            continue
        value = node[name]
        nested = next((k for k in _kinds(hints[name]) if is_dataclass(k)), None)
        if nested is not None and isinstance(value, Mapping):
            if "_target_" not in value:  # a node with its own target is checked on its own
                yield from node_errors(f"{prefix}{name}.", value, nested, partial, strict)
            continue
        rng = f.metadata.get(RANGE)
        if rng is not None and rng.schema is not None and isinstance(value, Mapping):
            yield from node_errors(f"{prefix}{name}.", value, rng.schema, partial=True)
            continue
        error = value_error(prefix + name, value, hints[name], rng)
        if error:
            yield error


# -- finding the settings nodes of a config without importing models ---------------------------
def _module_file(module: str) -> str | None:
    """The source file of a module, found on disk without executing it or its packages."""
    path: Any = None
    spec = None
    parts = module.split(".")
    for i in range(len(parts)):
        name = ".".join(parts[:i + 1])
        loaded = sys.modules.get(name)
        if loaded is not None:
            path, spec = getattr(loaded, "__path__", None), loaded.__spec__
            continue
        # a top-level name goes through every finder (an editable install has its own);
        # a submodule is looked up in its package's folders, so no package is executed
        spec = (importlib.util.find_spec(name) if i == 0
                else importlib.machinery.PathFinder.find_spec(name, path))
        if spec is None:
            return None
        path = spec.submodule_search_locations
    return spec.origin if spec is not None else None


@functools.cache
def _dataclass_names(source_file: str) -> frozenset[str]:
    """Top-level classes a source file decorates with @dataclass (read, not executed)."""
    try:
        tree = ast.parse(Path(source_file).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return frozenset()

    def is_dc(d: ast.expr) -> bool:
        d = d.func if isinstance(d, ast.Call) else d
        return (isinstance(d, ast.Name) and d.id == "dataclass") or (
            isinstance(d, ast.Attribute) and d.attr == "dataclass")

    return frozenset(n.name for n in tree.body
                     if isinstance(n, ast.ClassDef) and any(map(is_dc, n.decorator_list)))


def dataclass_target(target: str) -> type | None:
    """The dataclass a `_target_` names, or None. Only a module that defines the named class
    as a dataclass is imported: a loader target (models, indexes, a JVM) never is."""
    module, _, name = str(target).rpartition(".")
    if not module:
        return None
    loaded = sys.modules.get(module)
    if loaded is None:
        source = _module_file(module)
        if source is None or name not in _dataclass_names(source):
            return None
        loaded = importlib.import_module(module)
    obj = getattr(loaded, name, None)
    return obj if isinstance(obj, type) and is_dataclass(obj) else None


def settings_nodes(cfg: DictConfig) -> Iterator[tuple[str, DictConfig, type]]:
    """(path, node, dataclass) of every node whose `_target_` is a dataclass; interpolated
    nodes (`settings: ${ralm}`) are skipped: their source node is found where it lives."""
    # The tree's shape is read from one unresolved plain copy: an interpolation or a missing
    # value is a string there, a leaf is never visited through OmegaConf (whose per-key
    # access was most of a run's value check: about 40 ms of 65 for a composed config).
    def walk(node: DictConfig | ListConfig, plain: Any, path: str
             ) -> Iterator[tuple[str, DictConfig, type]]:
        if isinstance(plain, dict):
            target = plain.get("_target_")
            if isinstance(target, str) and "${" in target:
                target = node.get("_target_")  # an interpolated target, resolved
            cls = dataclass_target(target) if isinstance(target, str) else None
            if cls is not None:
                yield path, node, cls  # type: ignore[misc]
            items = [(str(k), k, v) for k, v in plain.items()]
        else:
            items = [(f"{i}", i, v) for i, v in enumerate(plain)]
        for label, key, value in items:
            if isinstance(value, (dict, list)):
                yield from walk(node[key], value, f"{path}.{label}" if path else label)

    yield from walk(cfg, OmegaConf.to_container(cfg, resolve=False), "")


def _plain(node: DictConfig) -> dict[str, Any]:
    out = OmegaConf.to_container(node, resolve=True)
    assert isinstance(out, dict)
    return out


def config_errors(cfg: DictConfig) -> list[str]:
    """Every refused value of a composed config: root keys, then each settings node."""
    errors = list(node_errors("", _plain_root(cfg), RootKeys, partial=True, strict=False))
    for path, node, cls in settings_nodes(cfg):
        plain = _plain(node)
        found = list(node_errors(f"{path}.", plain, cls,
                                 partial=bool(node.get("_partial_", False))))
        errors += found or list(positions_errors(cfg, path, plain, cls))
    return errors


# -- lengths against the model that reads them ---------------------------------------------
def positions_errors(cfg: DictConfig, path: str, node: Mapping[str, Any],
                     cls: type) -> Iterator[str]:
    """A length above the positions of the model its field names (`limits(positions=...)`)."""
    for f in fields(cls):
        rng = f.metadata.get(RANGE)
        value = node.get(f.name)
        if rng is None or rng.positions is None or not _is_kind(value, int):
            continue
        where = f"{path}{rng.positions}" if rng.positions.startswith(".") else rng.positions
        model = OmegaConf.select(cfg, where, default=None)
        if not isinstance(model, DictConfig):
            continue
        found = model_positions(_plain(model))
        if found is not None and value > found[0]:
            key, (limit, source) = f"{path}.{f.name}", found
            yield (f"{key}={value} is above the {limit} token positions of `{where}` "
                   f"({model.get('name') or model.get('source')}; {source}): a window that "
                   f"long cannot be scored. Set {key}<={limit}, or choose a model with more "
                   f"positions.")


def _plain_root(cfg: DictConfig) -> dict[str, Any]:
    names = [f.name for f in fields(RootKeys)]
    return {k: OmegaConf.to_container(cfg[k], resolve=True)
            if isinstance(cfg[k], (DictConfig, ListConfig)) else cfg[k]
            for k in names if k in cfg}


def check_values(cfg: DictConfig) -> None:
    """Refuse the run (ConfigError, exit code 2) at the first wrong value, before any load."""
    errors = config_errors(cfg)
    if errors:
        more = f" ({len(errors) - 1} more: {'; '.join(errors[1:4])})" if len(errors) > 1 else ""
        raise ConfigError(errors[0] + more)
