"""Method profiles: everything the core asks of a method package, through one plug-in seam.

A method package (In-Context RALM, RICHES, FilCo, or a fourth paper living anywhere on
`sys.path`) declares one `MethodProfile` and registers it under the Python entry-point group
`ragrepro.methods`:

    [project.entry-points."ragrepro.methods"]
    mymethod = "mymethod.profile:PROFILE"

The core finds every registered profile with `importlib.metadata` (`registered`) and loops
over them: `ragrepro plan` sizes a cell with the `planner` hooks of the profiles whose
packages the cell's `_target_`s name, the rehearsal caps the `rehearsal.generation_keys` and
calls its `training_caps` / `fixture_locations` / `coverage` hooks, the command-line check
knows the `config_groups`, the metric registry (ragrepro.metrics.registry) adds the
`metrics`, the generation diagnostics (ragrepro.generation) the `finish_reasons`, the report
the `sample_fields`, `flags` and `dashboard_settings`, and Hydra searches the `conf_dir` after
conf/ (the search-path plugin `hydra_plugins/ragrepro_methods`). So the core holds no method's
key names: they live in the method's own profile (docs/extending.md, "A method", walks
through a toy fourth method).

This module holds the profile type, the registry and the records the hooks return; it imports
nothing of the core's but the errors, so every core module may import it.
"""
from __future__ import annotations

import functools
import importlib.metadata
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from .errors import ConfigError

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ragrepro.methods"
GB = 1024 ** 3
BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}
TOKENS_PER_WORD = 1.2   # assumed subword tokens per WikiText-103 word


# -- what a plan hook returns ---------------------------------------------------------------
@dataclass
class ModelPlan:
    role: str
    source: str
    params: int
    dtype: str
    hidden: int
    layers: int
    vocab: int

    @property
    def weight_gb(self) -> float:
        return self.params * BYTES[self.dtype] / GB


@dataclass(frozen=True)
class IndexPlan:
    """One index a cell needs: what it is over, its size and what building it costs.
    ram_gb: memory while searching; build_ram_gb: peak memory while building."""

    what: str
    entries: str
    ram_gb: float
    disk_gb: float
    build_ram_gb: float
    build_hours: float
    note: str = ""
    chosen: bool = True  # False: an alternative shown for comparison, not what the cell runs


@dataclass(frozen=True)
class Sizing:
    """How much one cell computes through its main model: the tokens of every forward pass,
    the longest sequence (for the activation estimate) and the sequences per batch.
    `scored_tokens`: the positions whose vocabulary logits are computed (language modelling
    scores a window's new tokens only); None: every forward token's."""

    forward_tokens: int
    seq_len: int
    batch: int
    scored_tokens: int | None = None


@dataclass(frozen=True)
class Decoding:
    """What a cell generates, for the memory-bound decoding time (ragrepro/plan.py): `sequences`
    prompts of `context` tokens, `batch` at a time, each decoding `steps` tokens over `beam`
    hypotheses; `kv_passes`: how often a step moves the KV cache (1: attention reads it; a beam
    that reorders its cache by a gather also reads and writes it: 3)."""

    sequences: int
    steps: int
    context: int
    batch: int = 1
    beam: int = 1
    kv_passes: int = 1

    @property
    def generated_tokens(self) -> int:
        """Tokens through the model one decoding step at a time (the rest is prefill)."""
        return self.sequences * self.steps * self.beam


@dataclass
class PlanExtras:
    """What a method's plan hook adds to a cell. `sizing` None: the core's generic estimate
    (examples x (one 160-token passage + a 64-token prompt + 32 new tokens))."""

    models: list[ModelPlan] = field(default_factory=list)
    files: list[tuple[str, str, bool]] = field(default_factory=list)
    indexes: list[IndexPlan] = field(default_factory=list)
    uses_retriever: bool = True  # False: the cell never searches `retriever` (no index for it)
    sizing: Sizing | None = None
    decoding: Decoding | None = None  # None: the cell generates nothing (scoring only)


@dataclass(frozen=True)
class TrainingBudget:
    """The rehearsal's training size (conf/rehearsal/cpu.yaml: train_steps, train_examples,
    train_batch_size), which a method's `training_caps` applies to its own training keys."""

    steps: int
    examples: int
    batch: int


PlanHook = Callable[[DictConfig, float], PlanExtras]
TrainingHook = Callable[[DictConfig, TrainingBudget], dict[str, object]]
LocationHook = Callable[[DictConfig, Path], dict[str, object]]
CoverageHook = Callable[[DictConfig, Mapping[str, Any] | None], str]
IdViewHook = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class FinishReason:
    """One way a generation can end (ragrepro.generation), declared by the method that
    produces it; the core declares eos, stop and length. `normal`: a model or caller ending
    the answer on purpose (False: it was cut off, as by the budget)."""

    name: str
    means: str
    normal: bool = True


@dataclass(frozen=True)
class FlagDecl:
    """One flag rule a method adds to conf/report/flags.yaml's (ragrepro.report.flags): rows
    whose columns matching `columns` reach `at_least` are flagged `name`."""

    name: str
    columns: str
    at_least: float
    means: str

    def __post_init__(self) -> None:
        if not 0 < self.at_least <= 1:
            raise ConfigError(f"Flag {self.name!r}: at_least={self.at_least!r}; give a share "
                              f"in (0, 1], e.g. 0.10 for 10%.")


@dataclass(frozen=True)
class PlannerHooks:
    """What `ragrepro plan` asks of a method.

    plan               models, files, indexes, sizing and decoding of a cell (None: the
                       core's generic estimate)
    untimed_training   words for the plan's note that this training is not in the time
    eval_sizes         {dataset name: evaluation size} of the splits the method's paper
                       configs read (examples; language modelling: words), which the sizing
                       helpers below read; two methods naming one dataset must agree
    """

    plan: PlanHook | None = None
    untimed_training: str = ""
    eval_sizes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RehearsalHooks:
    """What the rehearsal (scripts/rehearse.py, ragrepro.rehearsal) asks of a method.

    generation_keys    dotted keys of generation budgets (max new tokens) it caps
    training_caps      {dotted key: capped value} of the method's training
    fixture_locations  {dotted key: fixture path} for the files a cell lacks
    coverage           why a finished cell proves too little ('' when fine); receives the
                       composed cell config and its metrics.json `metrics` (None: no file)
    fixture_titles     embedded article titles its fixtures must include
    write_fixtures     writes the method's own fixture files under the fixture root from
                       the fixture articles ((title, text) pairs; the core's datasets use the
                       first rows-per-split of them)
    """

    generation_keys: tuple[str, ...] = ()
    training_caps: TrainingHook | None = None
    fixture_locations: LocationHook | None = None
    coverage: CoverageHook | None = None
    fixture_titles: Callable[[], list[str]] | None = None
    write_fixtures: Callable[[Path, Sequence[tuple[str, str]], int], None] | None = None


@dataclass(frozen=True)
class MethodProfile:
    """What the core asks of one method. Only `name` and `packages` are required: a hook that
    is None means the method has nothing to add there (the core's generic behaviour holds).

    name               the entry point's name (`ralm`), used in messages
    packages           top-level packages whose `_target_`s make a cell this method's
    config_nodes       top-level config nodes the method owns (`ralm`, `qa`, `reranker`):
                       the core must not name them (tests/core/test_method_plugin.py)
    conf_dir           a conf folder searched after conf/ (a plug-in's experiments, groups,
                       report specs: `<package>/conf` for the built-in methods); None: none
    config_groups      config groups the command-line check verifies (`riches/method`)
    id_view            the run id: maps a resolved config to the form that is hashed, so a
                       setting that became a component keeps the id its plain name had
    metrics            ragrepro.metrics.registry.Metric of the columns only this method
                       writes (function, label, direction, resampling units), registered on
                       first lookup
    split_settings     result columns of this method that silently change a number: a plot
                       whose runs differ in one draws a line per value (ragrepro.report.plots)
    finish_reasons     FinishReason of the ways its generations end beyond the core's
                       eos / stop / length (a `gen_<stage>_<name>` rate column each)
    sample_fields      {role: field names} its samples.jsonl records use, appended to
                       conf/report/samples.yaml's lists for `ragrepro samples`
    flags              FlagDecl rules over its own diagnostic columns (`diag_<name>`),
                       after conf/report/flags.yaml's
    dashboard_settings recorded settings its sweeps vary: dashboard runs-table columns
                       after conf/report/dashboard.yaml's sweep_settings
    planner            PlannerHooks: what `ragrepro plan` asks
    rehearsal          RehearsalHooks: what the rehearsal asks
    """

    name: str
    packages: tuple[str, ...]
    config_nodes: tuple[str, ...] = ()
    conf_dir: Path | None = None
    config_groups: tuple[str, ...] = ()
    id_view: IdViewHook | None = None
    metrics: tuple[Any, ...] = ()
    split_settings: tuple[str, ...] = ()
    finish_reasons: tuple[FinishReason, ...] = ()
    sample_fields: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    flags: tuple[FlagDecl, ...] = ()
    dashboard_settings: tuple[str, ...] = ()
    planner: PlannerHooks = field(default_factory=PlannerHooks)
    rehearsal: RehearsalHooks = field(default_factory=RehearsalHooks)


# -- sizing helpers for a plan hook (dataset facts, no method's) ----------------------------------
def eval_size(dataset: str | None, profiles: Iterable[MethodProfile] | None = None) -> int:
    """The evaluation size of `dataset` the methods declare (their planners' `eval_sizes`:
    the splits their paper configs read); 0 when none does. Two methods that give one
    dataset different sizes is a ConfigError."""
    sizes = {p.name: p.planner.eval_sizes[dataset]
             for p in (registered() if profiles is None else profiles)
             if dataset in p.planner.eval_sizes}
    if len(set(sizes.values())) > 1:
        raise ConfigError(f"Methods disagree on the evaluation size of {dataset}: {sizes}. "
                          f"Correct the wrong profile's planner eval_sizes.")
    return next(iter(sizes.values()), 0)


def eval_examples(cfg: DictConfig, profiles: Iterable[MethodProfile] | None = None) -> int:
    """Examples (QA) or words (language modelling) the cell evaluates: its split's size,
    capped by `limit`."""
    n = eval_size(OmegaConf.select(cfg, "dataset.name", default=None), profiles)
    limit = OmegaConf.select(cfg, "limit", default=None)
    return min(n, int(limit)) if limit else n


def eval_tokens(cfg: DictConfig, profiles: Iterable[MethodProfile] | None = None) -> int:
    """Subword tokens of the cell's evaluation text (language modelling: words x
    TOKENS_PER_WORD; `limit` counts documents there, so it does not cap these)."""
    return int(eval_size(OmegaConf.select(cfg, "dataset.name", default=None), profiles)
               * TOKENS_PER_WORD)


def qa_forward_tokens(cfg: DictConfig, docs: int, new_tokens: int) -> int:
    """Examples x (`docs` passages of ~160 tokens + a 64-token prompt + the generated ones)."""
    return eval_examples(cfg) * (docs * 160 + 64 + new_tokens)


def generic_sizing(cfg: DictConfig) -> Sizing:
    """A cell no method sizes: one passage and 32 new tokens per example, 2,048-token
    sequences, `batch_size` sequences per batch."""
    return Sizing(qa_forward_tokens(cfg, 1, 32), 2048,
                  int(OmegaConf.select(cfg, "batch_size", default=None) or 1))


# -- the registry ----------------------------------------------------------------------------
def profiles_from(entries: Iterable[importlib.metadata.EntryPoint]) -> tuple[MethodProfile, ...]:
    """The profiles the entry points name, sorted by name; a wrong object, a name that differs
    from its entry point's, two profiles of one name or a missing conf_dir is a ConfigError."""
    found: dict[str, MethodProfile] = {}
    for entry in entries:
        profile = entry.load()
        if not isinstance(profile, MethodProfile):
            raise ConfigError(f"Entry point {entry.name} = {entry.value} of group "
                              f"{ENTRY_POINT_GROUP!r} is a {type(profile).__name__}, not a "
                              f"ragrepro.methods.MethodProfile: point it at the profile object.")
        if profile.name != entry.name:
            raise ConfigError(f"Entry point {entry.name} = {entry.value} names a profile called "
                              f"{profile.name!r}: give the entry point the profile's name.")
        if profile.name in found and found[profile.name] != profile:
            raise ConfigError(f"Two method profiles are called {profile.name!r} (entry point "
                              f"{entry.value}): rename one.")
        for part, kind in (("planner", PlannerHooks), ("rehearsal", RehearsalHooks)):
            if not isinstance(getattr(profile, part), kind):
                raise ConfigError(f"Method {profile.name}: {part}= is a "
                                  f"{type(getattr(profile, part)).__name__}, not a "
                                  f"ragrepro.methods.{kind.__name__}: build it as "
                                  f"{part}={kind.__name__}(...).")
        if profile.conf_dir is not None and not Path(profile.conf_dir).is_dir():
            raise ConfigError(f"Method {profile.name}: conf_dir={profile.conf_dir} is not a "
                              f"folder: point it at the method's conf folder, or use None.")
        found[profile.name] = profile
    return tuple(found[name] for name in sorted(found))


def method_entry_points() -> list[importlib.metadata.EntryPoint]:
    """The group's entry points of every distribution on sys.path, the same one seen twice
    kept once. Read per distribution, not with `entry_points(group=...)`: that keeps only the
    first distribution of a name, and a stale `ragrepro.egg-info` left in the checkout (on
    sys.path whenever Python runs from the repository root) would hide the installed one."""
    seen: dict[tuple[str, str], importlib.metadata.EntryPoint] = {}
    for dist in importlib.metadata.distributions():
        for entry in dist.entry_points:
            if entry.group == ENTRY_POINT_GROUP:
                seen.setdefault((entry.name, entry.value), entry)
    return list(seen.values())


@functools.cache
def registered() -> tuple[MethodProfile, ...]:
    """Every installed method profile (entry-point group `ragrepro.methods`), by name. Cached
    for the process: a profile installed meanwhile is seen by the next process."""
    found = profiles_from(method_entry_points())
    if not found:
        # an install that predates the entry points would plan and rehearse without them
        log.warning("No method profile is registered (entry-point group %r): the core "
                    "knows no method. Reinstall the package (`make setup`, or `pip install "
                    "-e .`) so its entry points exist.", ENTRY_POINT_GROUP)
    return found


def code_paths(profiles: Iterable[MethodProfile] | None = None) -> tuple[str, ...]:
    """The methods' package folders, which ragrepro.metadata hashes into the code id beside
    the core's (a method whose YAML lives in its own conf_dir ships it inside its package)."""
    out: list[str] = []
    for p in registered() if profiles is None else profiles:
        out += [pkg for pkg in p.packages if pkg not in out]
    return tuple(out)


def conf_dirs(profiles: Iterable[MethodProfile] | None = None) -> list[Path]:
    """The conf folders the methods add to Hydra's search path, in profile order."""
    return [Path(p.conf_dir) for p in (registered() if profiles is None else profiles)
            if p.conf_dir is not None]


def _targets(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("_target_"), str):
            yield node["_target_"]
        for v in node.values():
            yield from _targets(v)
    elif isinstance(node, list):
        for v in node:
            yield from _targets(v)


def target_packages(cfg: DictConfig) -> set[str]:
    """The top-level packages the config's `_target_`s name (interpolations unresolved)."""
    raw = OmegaConf.to_container(cfg, resolve=False)
    return {t.split(".")[0] for t in _targets(raw)}


def profiles_of(cfg: DictConfig,
                profiles: Iterable[MethodProfile] | None = None) -> list[MethodProfile]:
    """The profiles of the methods a cell runs: those whose packages its `_target_`s name."""
    packages = target_packages(cfg)
    return [p for p in (registered() if profiles is None else profiles)
            if packages & set(p.packages)]


def id_view(resolved: dict[str, Any],
            profiles: Iterable[MethodProfile] | None = None) -> dict[str, Any]:
    """The resolved config as the run id hashes it: each profile's `id_view` applied in turn."""
    for profile in registered() if profiles is None else profiles:
        if profile.id_view is not None:
            resolved = profile.id_view(resolved)
    return resolved
