"""Choosing one document among the top-k retrieved (paper §6; reference §3.5): the variants of
`ralm.rerank`, one small class each, and the choice rules they use.

Variants (the config group `ralm/rerank=<name>`, ralm/conf/ralm/rerank/<name>.yaml, whose option
sets `ralm.rerank: {_target_: ralm.rerank.<Class>}`; the name is the row's `rerank` column):
- `none`: no retrieval at all (the "no retrieval" rows).
- `first`: the retriever's top hit (no reranking).
- `random`: uniform among the top k, from a generator seeded by (seed, retrieval index), so a
  resumed run makes the same choices.
- `zeroshot`: the document minimising the NLL of the last s' prefix tokens, each conditioned
  on [doc; earlier prefix] (paper Eq. 6). The scoring LM may differ from the evaluated LM.
- `oracle`: the document minimising the NLL of the actual target tokens (upper bound, Fig. 7).
- `predictive`: the highest score of a trained reranker (§6.2, Eq. 7-8).
- `gold`: no retriever; the evaluated text's own article is the only document (a deliberate
  leak, the mechanism's upper bound; ralm/gold.py).

The pipeline asks a variant what it needs (documents? a search? an LM ranking pass? a trained
reranker?) and never compares its name: a new variant is a class here, its name in `VARIANTS`
and an option file in ralm/conf/ralm/rerank/. The run id hashes the variant by its name
(ralm/profile.py `id_view`), so the runs made when `ralm.rerank` was a plain string are reused.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ragrepro.errors import ConfigError, NumericsError, unknown_name


@dataclass(frozen=True)
class Rerank:
    """A way to choose the document of a retrieval window. Class attributes, not fields: a
    variant has no settings of its own (k, rerank_tokens... are `ralm.*`)."""

    name: ClassVar[str]
    retrieves: ClassVar[bool] = True     # windows get documents (false: no retrieval)
    searches: ClassVar[bool] = True      # from the retriever (or a retrieval file), not gold
    lm_ranked: ClassVar[bool] = False    # each candidate is scored by an LM (k passes)
    ranks_targets: ClassVar[bool] = False  # that LM scores the window's targets (oracle)
    ranks_prefix: ClassVar[bool] = False   # it scores the last s' prefix tokens (zero-shot):
    #                                        rerank_tokens count in the window, scorer= applies
    trained: ClassVar[bool] = False      # needs the predictive reranker

    def pick(self, n_docs: int, seed: int, retrieval_index: int) -> int:
        """The choice of a variant that neither LM-ranks nor predicts."""
        raise NotImplementedError(f"ralm/rerank={self.name} does not pick without scores")

    def candidates(self, k: int) -> int:
        """LM passes per retrieval window (ragrepro plan): k for an LM ranking, else 1."""
        return int(k) if self.lm_ranked else 1

    def window_extra(self, rerank_tokens: int) -> int:
        """Tokens beyond document + stride the window must hold (zero-shot's s')."""
        return int(rerank_tokens) if self.ranks_prefix else 0

    def row(self, k: int, rerank_tokens: int, scorer_name: str) -> dict[str, Any]:
        """The row's reranking columns: the settings that matter for this variant, None for
        the others (so rows of different variants stay comparable column by column)."""
        return {"k": int(k) if self.retrieves else None, "rerank": self.name,
                "rerank_tokens": int(rerank_tokens) if self.ranks_prefix else None,
                "scorer_model": scorer_name if self.ranks_prefix else None}


@dataclass(frozen=True)
class NoRetrieval(Rerank):
    name: ClassVar[str] = "none"
    retrieves: ClassVar[bool] = False
    searches: ClassVar[bool] = False


@dataclass(frozen=True)
class First(Rerank):
    name: ClassVar[str] = "first"

    def pick(self, n_docs: int, seed: int, retrieval_index: int) -> int:
        return choose_first(n_docs)


@dataclass(frozen=True)
class Random(Rerank):
    name: ClassVar[str] = "random"

    def pick(self, n_docs: int, seed: int, retrieval_index: int) -> int:
        return choose_random(n_docs, seed, retrieval_index)


@dataclass(frozen=True)
class ZeroShot(Rerank):
    name: ClassVar[str] = "zeroshot"
    lm_ranked: ClassVar[bool] = True
    ranks_prefix: ClassVar[bool] = True


@dataclass(frozen=True)
class Oracle(Rerank):
    name: ClassVar[str] = "oracle"
    lm_ranked: ClassVar[bool] = True
    ranks_targets: ClassVar[bool] = True


@dataclass(frozen=True)
class Predictive(Rerank):
    name: ClassVar[str] = "predictive"
    trained: ClassVar[bool] = True


@dataclass(frozen=True)
class Gold(Rerank):
    name: ClassVar[str] = "gold"
    searches: ClassVar[bool] = False

    def pick(self, n_docs: int, seed: int, retrieval_index: int) -> int:
        return choose_first(n_docs)  # the one document: the window's own article


VARIANTS: dict[str, type[Rerank]] = {
    c.name: c for c in (NoRetrieval, First, Random, ZeroShot, Oracle, Predictive, Gold)}
NAMES = tuple(VARIANTS)


def not_a_variant(value: Any) -> ConfigError:
    """The error for a `ralm.rerank` that is not a variant (e.g. the plain name the node held
    before it became a config group)."""
    return ConfigError(f"ralm.rerank={value!r} is not a rerank variant: choose one with the "
                       f"config group, e.g. `ralm/rerank=zeroshot` (ralm/conf/ralm/rerank/: "
                       f"{', '.join(NAMES)}), not `ralm.rerank=zeroshot`.")


def variant(name: str) -> Rerank:
    """The variant class registered under `name` (ralm.settings.rerank_option reads the
    config group option instead, as a run does)."""
    if name not in VARIANTS:
        raise unknown_name("ralm.rerank strategy", name, NAMES)
    return VARIANTS[name]()


def choose_first(n_docs: int) -> int:
    if n_docs < 1:
        raise ConfigError("no documents to choose from")
    return 0


def choose_random(n_docs: int, seed: int, retrieval_index: int) -> int:
    """Uniform over n_docs; the generator depends only on (seed, retrieval index)."""
    if n_docs < 1:
        raise ConfigError("no documents to choose from")
    rng = np.random.default_rng([int(seed), int(retrieval_index)])
    return int(rng.integers(n_docs))


def choose_min_nll(nll_sums: Sequence[float]) -> int:
    """argmin of summed NLL, first index on ties (torch.argmin's rule in the official code)."""
    arr = np.asarray(nll_sums, dtype=np.float64)
    if arr.size == 0:
        raise ConfigError("no documents to choose from")
    if not np.all(np.isfinite(arr)):
        raise NumericsError(f"non-finite reranking NLL: {arr.tolist()}")
    return int(np.argmin(arr))


def choose_max_score(scores: Sequence[float]) -> int:
    """Eq. 8: the document with the highest reranker score (first on ties)."""
    arr = np.asarray(scores, dtype=np.float64)
    if arr.size == 0:
        raise ConfigError("no documents to choose from")
    return int(np.argmax(arr))
