"""Typed FilCo settings, built by Hydra from the `_target_`s of the `filco:` node
(filco/conf/filco/default.yaml, mini.yaml, paper.yaml). No field has a default: the defaults live in
the YAML only, so a renamed, misspelt or missing key fails when the pipeline is built
(ragrepro.pipeline turns it into a ConfigError), not silently at run time."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from ragrepro.errors import ConfigError
from ragrepro.validate import limits

from .measures import MEASURES
from .prompts import CTX_ANSWER_PREFIXES, GEN_FORMATS
from .split import SPLITTERS
from .tasks import TASKS
from .train import TrainConfig
from .variants import Variant

STAGES = ("generate", "context")
PASSAGES = ("auto", "record", "retriever")
MEASURE_MODES = ("paper", "code")
TEST_CONTEXTS = ("predicted", "silver_as_released")
TRAIN_ROLES = ("ctx", "gen", "psg")
# TrainConfig fields a YAML may set (the seed is the run's)
TRAIN_KEYS = tuple(f.name for f in fields(TrainConfig) if f.name != "seed")


def _one_of(key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{key}={value!r}; use one of {choices}.")


@dataclass(frozen=True)
class CxmiSettings:
    """`filco.cxmi.*`: how CXMI is scored (the scorer model is a pipeline component,
    `cxmi_scorer`; none = the generator's base model)."""

    prompt: str = field(metadata=limits(choices=("paper", "code")))  # M_gen prompt | calc_cxmi
    batch_size: int = field(metadata=limits(min=1))

    def __post_init__(self) -> None:
        _one_of("filco.cxmi.prompt", self.prompt, ("paper", "code"))


# The released code's fallbacks (reference §3); the paper states none of them, so each other
# choice is a named switch, and a row that uses one says so (FallbackSettings.switches).
OFFICIAL_FALLBACK = {"gen_train": "top1", "ctx_target": "empty", "test": "none"}
FALLBACK_CHOICES = {"gen_train": ("top1", "empty"), "ctx_target": ("empty", "top1", "drop"),
                    "test": ("none", "top1")}


@dataclass(frozen=True)
class FallbackSettings:
    """`filco.fallback.*`: what replaces an empty silver or predicted context."""

    gen_train: str = field(metadata=limits(choices=FALLBACK_CHOICES["gen_train"]))  # top1: code
    ctx_target: str = field(metadata=limits(choices=FALLBACK_CHOICES["ctx_target"]))  # empty: code
    test: str = field(metadata=limits(choices=FALLBACK_CHOICES["test"]))  # none: code

    def __post_init__(self) -> None:
        for key, choices in FALLBACK_CHOICES.items():
            _one_of(f"filco.fallback.{key}", getattr(self, key), choices)

    def switches(self) -> list[str]:
        """The fallbacks that differ from the released code's, as `fallback.<key>=<value>`."""
        return [f"fallback.{k}={getattr(self, k)}" for k in OFFICIAL_FALLBACK
                if getattr(self, k) != OFFICIAL_FALLBACK[k]]


def variant_label(setting: str, switches: list[str]) -> str:
    """A row's name in tables: the setting, and each switch it runs with, named as one
    (`filco [switch fallback.test=top1]`); the official behaviour is the bare setting."""
    return setting + "".join(f" [switch {s}]" for s in switches)


@dataclass(frozen=True)
class TrainSettings:
    """`filco.train.*`: fine-tuning settings shared by every model (`common`, every key of
    TrainConfig but the seed) and per role (`ctx`, `gen`, `psg`: keys that replace common's)."""

    common: Mapping[str, Any] = field(metadata=limits(schema=TrainConfig))
    ctx: Mapping[str, Any] = field(metadata=limits(schema=TrainConfig))
    gen: Mapping[str, Any] = field(metadata=limits(schema=TrainConfig))
    psg: Mapping[str, Any] = field(metadata=limits(schema=TrainConfig))

    def __post_init__(self) -> None:
        missing = set(TRAIN_KEYS) - set(self.common)
        if missing:
            raise ConfigError(f"filco.train.common lacks {sorted(missing)}.")
        for role in ("common", *TRAIN_ROLES):
            unknown = set(getattr(self, role)) - set(TRAIN_KEYS)
            if unknown:
                raise ConfigError(f"filco.train.{role}: unknown keys {sorted(unknown)}; "
                                  f"use {TRAIN_KEYS}.")
        for role in TRAIN_ROLES:
            self.config(role, 0).check()

    def config(self, role: str, seed: int) -> TrainConfig:
        """The TrainConfig of one role (`ctx`, `gen` or `psg`): common, then the role's keys."""
        return TrainConfig(seed=seed, **{**self.common, **getattr(self, role)})


@dataclass(frozen=True)
class FilcoSettings:
    """`filco.*`: one FilCo setting on one evaluation set; see filco/conf/filco/default.yaml."""

    setting: Variant         # Full | Psg | FilCo | Silver: the filco/variant group builds it
    stage: str = field(metadata=limits(choices=STAGES))  # context: Table 3, Fig. 6
    task: str = field(metadata=limits(choices=("auto", *TASKS)))  # auto: the dataset's `task`
    k: int = field(metadata=limits(min=1))  # retrieved passages per example
    passages: str = field(metadata=limits(choices=PASSAGES))
    measure: str = field(metadata=limits(choices=("auto", *MEASURES)))  # auto: the task's (§4.2)
    measure_mode: str = field(metadata=limits(choices=MEASURE_MODES))
    measure_overrides: Mapping[str, Any]
    splitter: str = field(metadata=limits(choices=SPLITTERS))
    cxmi: CxmiSettings
    fallback: FallbackSettings
    gen_format: str = field(metadata=limits(choices=GEN_FORMATS))
    # judgement: FEVER, get_inputs.py --answer_prefix
    ctx_answer_prefix: str = field(metadata=limits(choices=CTX_ANSWER_PREFIXES))
    # predicted: the paper; silver_as_released: the released code
    test_context: str = field(metadata=limits(choices=TEST_CONTEXTS))
    max_input_tokens: int = field(metadata=limits(min=1))
    ctx_max_new_tokens: int = field(metadata=limits(min=1))
    gen_max_new_tokens: int = field(metadata=limits(min=1))
    gen_batch_size: int = field(metadata=limits(min=1))
    train: TrainSettings

    def __post_init__(self) -> None:
        if not isinstance(self.setting, Variant):
            raise ConfigError(
                f"filco.setting={self.setting!r} is not a FilCo setting: choose one with the "
                "config group, e.g. `filco/variant=psg` (filco/conf/filco/variant/: full, psg, "
                "filco, silver and the switch variants), not `filco.setting=psg`.")
        _one_of("filco.stage", self.stage, STAGES)
        _one_of("filco.passages", self.passages, PASSAGES)
        _one_of("filco.test_context", self.test_context, TEST_CONTEXTS)
