"""Turning prompt/target strings into token rows for causal and seq2seq models, identically at
training, scoring and generation time."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragrepro.models.lm import LM

SEP = "\n"  # causal models: the prompt ends with a newline, the target follows


def causal_prompt_ids(lm: LM, prompt: str, max_len: int | None = None) -> list[int]:
    """Prompt tokens for a causal LM (model BOS policy applied). When too long, the prompt is
    cut at the end (where the retrieved context is) and the separator kept, so the model still
    sees where its output starts."""
    ids = lm.encode(prompt + SEP)
    if max_len is not None and len(ids) > max_len:
        sep = lm.encode(SEP, add_bos=False)
        ids = ids[:max_len - len(sep)] + sep
    return ids


def causal_target_ids(lm: LM, target: str) -> list[int]:
    """Target tokens followed by EOS (so a fine-tuned model learns to stop)."""
    ids = lm.encode(target, add_bos=False)
    return ids + ([lm.eos_id] if lm.eos_id is not None else [])


def seq2seq_source_ids(lm: LM, prompt: str, max_len: int | None = None) -> list[int]:
    ids = lm.tokenizer(prompt, add_special_tokens=True)["input_ids"]
    if max_len is not None and len(ids) > max_len:
        ids = ids[:max_len - 1] + [ids[-1]]  # keep </s>
    return ids


def seq2seq_target_ids(lm: LM, target: str, max_len: int | None = None) -> list[int]:
    ids = lm.tokenizer(target, add_special_tokens=True)["input_ids"]  # ends with </s>
    if max_len is not None and len(ids) > max_len:
        ids = ids[:max_len - 1] + [ids[-1]]
    return ids


def prompt_ids(lm: LM, prompt: str, max_len: int | None = None) -> list[int]:
    if lm.kind == "causal":
        return causal_prompt_ids(lm, prompt, max_len)
    return seq2seq_source_ids(lm, prompt, max_len)


def prompt_ids_truncated(lm: LM, prompt: str, max_len: int | None) -> tuple[list[int], bool]:
    """prompt_ids, and whether the prompt had to be cut to max_len (a diagnostic: a cut
    prompt lost part of its retrieved context)."""
    ids = prompt_ids(lm, prompt, max_len)
    return ids, max_len is not None and len(prompt_ids(lm, prompt, None)) > max_len


def target_ids(lm: LM, target: str, max_len: int | None = None) -> list[int]:
    if lm.kind == "causal":
        ids = causal_target_ids(lm, target)
        return ids[:max_len] if max_len else ids
    return seq2seq_target_ids(lm, target, max_len)


def count_tokens(lm: LM, texts: Sequence[str]) -> list[int]:
    return [len(lm.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in texts]
