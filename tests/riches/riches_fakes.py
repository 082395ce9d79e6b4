"""A word-level toy vocabulary and a bigram 'model' whose logits the tests control; the
shipped prompts and key settings as the experiments compose them."""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from ragrepro.paths import CONF_DIR
from riches.constraint import KeyConstraint, marker_lookalike_ids, word_start_ids
from riches.index import SuffixIndex
from riches.markers import MarkerSpec
from riches.settings import KeySettings

WORDS = ["<pad>", "<eos>", " <<", " >>", " Joker", " is", " played", " by", " Joaquin",
         " Phoenix", " Heath", " Ledger", " Nolan", " Christopher", ".", " answer", "\n\n",
         " Batman", " the", " film", " <<<", ">>", " in", " 2019", "\n"]
ID = {w: i for i, w in enumerate(WORDS)}
V = len(WORDS)
EOS = ID["<eos>"]
EOS_WORD = "<eos>"
SPEC = MarkerSpec((ID[" <<"],), (ID[" >>"],))


def ids(text_words: Sequence[str]) -> list[int]:
    return [ID[w] for w in text_words]


def decode(tokens: Sequence[int]) -> str:
    return "".join(WORDS[t] for t in tokens)


def toy_constraint(keys: list[list[str]], **kw) -> KeyConstraint:
    index = SuffixIndex.build([ids(k) for k in keys], V)
    return KeyConstraint(index=index, spec=SPEC, vocab_size=V, word_starts=word_start_ids(WORDS),
                         free_banned=marker_lookalike_ids(WORDS, SPEC), **kw)


class BigramModel:
    """logits(next | last token) = table[last]; records the batch size of every call."""

    def __init__(self, table: np.ndarray) -> None:
        self.table = torch.tensor(table, dtype=torch.float32)
        self.last: list[int] = []
        self.batch_sizes: list[int] = []

    def start(self, prompt: Sequence[int]) -> torch.Tensor:
        self.last = [int(prompt[-1])]
        self.batch_sizes.append(1)
        return self.table[self.last]

    def step(self, parents: Sequence[int], tokens: Sequence[int]) -> torch.Tensor:
        assert all(0 <= p < len(self.last) for p in parents)
        self.last = [int(t) for t in tokens]
        self.batch_sizes.append(len(tokens))
        return self.table[self.last]


def table_from(prefs: dict[str, dict[str, float]], default: float = -10.0) -> np.ndarray:
    """A V x V logit table: prefs[prev word][next word] = logit."""
    t = np.full((V, V), default, dtype=np.float64)
    for prev, row in prefs.items():
        for nxt, v in row.items():
            t[ID[prev], ID[nxt]] = v
    return t


@cache
def riches_config(*overrides: str) -> DictConfig:
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        return compose("config", overrides=["experiment=riches/main", *overrides])


def shipped_prompt(name: str) -> dict[str, Any]:
    """riches/conf/riches/prompts/<name>.yaml as the experiments compose it
    (riches.prompts.<name>)."""
    return OmegaConf.to_container(riches_config().riches.prompts[name], resolve=True)


def key_settings(key_type: str, **changes: Any) -> KeySettings:
    """riches/conf/riches/keys/<key_type>.yaml built into KeySettings, with `changes`."""
    node = riches_config(f"riches/keys@riches.key={key_type}").riches.key
    return dataclasses.replace(instantiate(node, _convert_="object"), **changes)
