"""Generation budgets that fit their prompts (issue 22): every RICHES generation budget is
checked at pipeline start, with the run's own tokenizer, against the longest output its
prompt's demonstrations show (ragrepro.generation.check_budget); a budget that cannot hold
the demonstrations' own outputs cuts every generation off, and the row would measure the
harness.

Under the rehearsal the budgets are capped for speed; the rehearsal records each capped key's
configured value (`rehearsal.uncapped`, dotted key -> value), and the check reads that value:
the rehearsal still checks the budget a real run would use.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ragrepro.generation import check_budget
from ragrepro.models.lm import LM

from .prompts import RichesPrompt
from .settings import RichesSettings


def configured(key: str, value: Any, uncapped: Mapping[str, Any] | None) -> Any:
    """The value `key` was configured with: the rehearsal's record of it, else `value`."""
    return uncapped[key] if uncapped and key in uncapped else value


def decode_budget(s: RichesSettings, uncapped: Mapping[str, Any] | None) -> tuple[str, int]:
    """(key, configured budget) of RICHES decoding: riches.max_new_tokens, or, when that is
    null, the key type's riches.key.max_new_tokens."""
    top = configured("riches.max_new_tokens", s.max_new_tokens, uncapped)
    if top is not None:
        return "riches.max_new_tokens", int(top)
    return "riches.key.max_new_tokens", int(configured("riches.key.max_new_tokens",
                                                        s.key.max_new_tokens, uncapped))


def check_ids(key: str, budget: int, outputs: Sequence[Sequence[int]], lm: LM) -> int:
    """check_budget over outputs already tokenised as the prompt assembles them (RICHES
    prompts are built segment by segment, so re-encoding their text could count otherwise)."""
    texts = [lm.decode(list(o)) for o in outputs]
    by_text = {t: list(o) for t, o in zip(texts, outputs)}
    return check_budget(key, budget, texts, by_text.__getitem__)


def check_decoding(s: RichesSettings, prompt: RichesPrompt, lm: LM,
                   uncapped: Mapping[str, Any] | None) -> int:
    key, budget = decode_budget(s, uncapped)
    return check_ids(key, budget, prompt.demo_outputs(), lm)


def reader_outputs(cfg: Mapping[str, Any]) -> list[str]:
    """What the dense reader's demonstrations show after 'Answer:' (riches/prompts.py
    reader_prompt): the answer and its line end."""
    return [f" {ex['answer']}\n" for ex in cfg["examples"]]


def iterative_outputs(cfg: Mapping[str, Any]) -> list[str]:
    """Each line the self-ask demonstrations show the model writing (riches/prompts.py
    iterative_demo): every follow-up question and the answer line; the evidence lines are
    retrieved, not generated."""
    out = []
    for ex in cfg["examples"]:
        out += [f"Follow-up: {st['subquestion']}\n" for st in ex["steps"]]
        out.append(f"Answer: {ex['answer']}\n")
    return out


def check_reader(s: RichesSettings, cfg: Mapping[str, Any], lm: LM,
                 uncapped: Mapping[str, Any] | None) -> int:
    key = "riches.reader_max_new_tokens"
    return check_budget(key, int(configured(key, s.reader_max_new_tokens, uncapped)),
                        reader_outputs(cfg), lambda t: lm.encode(t, add_bos=False))


def check_iterative(s: RichesSettings, cfg: Mapping[str, Any], lm: LM,
                    uncapped: Mapping[str, Any] | None) -> int:
    key = "riches.iterative.max_new_tokens"
    return check_budget(key, int(configured(key, s.iterative.max_new_tokens, uncapped)),
                        iterative_outputs(cfg), lambda t: lm.encode(t, add_bos=False),
                        what="follow-up or answer line")
