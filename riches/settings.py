"""Typed RICHES settings, built by Hydra from riches/conf/riches/base.yaml and
riches/conf/riches/keys/*.yaml.

The dataclasses have no defaults on purpose: the defaults live in the YAML files only, so a
renamed or missing key fails when the pipeline is built (ragrepro.pipeline.build_pipeline)
instead of silently falling back to a value written twice.
"""
from __future__ import annotations

import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ragrepro.metrics.autoais import AutoAIS
from ragrepro.models.lm import LM
from ragrepro.validate import limits

from .keys import KEY_TYPES

# Where a key may start and end (riches/constraint.py) and what a few-shot example shows
# (riches/prompts.py example_key): declared here so a wrong word stops the run before it loads.
KEY_BOUNDS = ("anywhere", "key")
DEMOS = ("unit", "sentence", "first_sentence")
# the AutoAIS judge for a run's LM, or None when attribution is disabled (riches/attribution.py)
JudgeFactory = Callable[[LM], AutoAIS | None]


def coerce_numbers(obj: Any) -> None:
    """Cast int/float fields to their declared type in place: YAML and the command line give
    `1` for a float setting, and a row must say 1.0 whichever way it was typed."""
    hints = typing.get_type_hints(type(obj))
    for f in fields(obj):
        kinds = typing.get_args(hints[f.name]) if isinstance(hints[f.name], types.UnionType) \
            else (hints[f.name],)
        value = getattr(obj, f.name)
        for kind in (float, int):
            if kind in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
                object.__setattr__(obj, f.name, kind(value))
                break


@dataclass(frozen=True)
class KeySettings:
    """One retrieval-key type (riches/conf/riches/keys/<name>.yaml over
    riches/conf/riches/key_defaults.yaml).

    source .. min_overlap concern proposition keys only (unit=proposition); every key file
    carries them so that one dataclass describes every key type."""

    name: str
    unit: str = field(metadata=limits(choices=KEY_TYPES))
    # key: a key starts where an indexed key starts / the close marker only where one ends
    start: str = field(metadata=limits(choices=KEY_BOUNDS))
    end: str = field(metadata=limits(choices=KEY_BOUNDS))
    min_key_tokens: int = field(metadata=limits(min=1))
    start_at_word: bool
    evidence: str             # AutoAIS premise: key (the decoded text) | document
    max_new_tokens: int = field(metadata=limits(min=1))
    demo: str = field(metadata=limits(choices=DEMOS))
    source: str               # lm (mini) | factoid-wiki (paper, with paths)
    paths: Sequence[str]
    articles: str             # source=lm: sample
    n_articles: int | None = field(metadata=limits(min=1))
    seed: int = field(metadata=limits(min=0))
    generation_max_new_tokens: int = field(metadata=limits(min=1))
    min_overlap: float = field(metadata=limits(min=0, max=1))

    def __post_init__(self) -> None:
        coerce_numbers(self)


@dataclass(frozen=True)
class Markers:
    open: str
    close: str


@dataclass(frozen=True)
class DenseSettings:
    """The dense retriever + reader baseline: k = a number, or `auto` (RICHES's mean #keys)."""

    k: int | str = field(metadata=limits(min=1, choices=("auto",)))
    k_default: int = field(metadata=limits(min=1))


@dataclass(frozen=True)
class IterativeSettings:
    max_steps: int = field(metadata=limits(min=1))
    max_new_tokens: int = field(metadata=limits(min=1))


@dataclass(frozen=True)
class RichesSettings:
    """The `riches:` node. Each variant (riches/pipeline.py) reads the fields it needs."""

    prompt: str               # auto | a name in `prompts`
    prompts: Mapping[str, Mapping[str, Any]]   # composed from riches/conf/riches/prompts/*.yaml
    thoughts: bool
    beam_size: int = field(metadata=limits(min=1))
    adaptive: bool
    renormalize: bool
    length_penalty: float = field(metadata=limits(min=0))
    max_new_tokens: int | None = field(metadata=limits(min=1))  # None: the key type's
    markers: Markers
    key: KeySettings
    dense: DenseSettings
    reader_max_new_tokens: int = field(metadata=limits(min=1))
    # tokens per suffix-array shard (riches/index_build.py): int32 positions, so at most 2^31 - 1
    index_shard_tokens: int = field(metadata=limits(min=3, max=2**31 - 1))
    iterative: IterativeSettings
    autoais: JudgeFactory

    def __post_init__(self) -> None:
        coerce_numbers(self)
