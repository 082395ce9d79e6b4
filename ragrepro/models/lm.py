"""One wrapper for causal and seq2seq LMs: encode with a per-model BOS policy, score target
spans (computing vocabulary logits only where a token is scored), and generate."""
from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..dtypes import effective_dtype
from ..errors import ConfigError, NumericsError
from ..generation import finish_reason
from ..lock import check_loaded, model_id
from .loading import check_attn_implementation, load_pretrained, resolve_source
from .passes import PassMemo, batch_key, row_keys, rows_enabled, shared_memo, weights_checksum

log = logging.getLogger(__name__)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def pick_device(device: str | None) -> str:
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def device_type(device: str | None) -> str:
    """cpu / cuda / mps: what a row records (`cuda:1` and `auto` on a GPU machine: cuda)."""
    return pick_device(device).split(":", 1)[0]


@dataclass
class LM:
    """A loaded model and its tokenizer. `add_bos` is the model's BOS policy: Gemma needs BOS
    at the start of a text; GPT-2-style evaluation text (the official RALM code) has none."""

    name: str
    model: Any
    tokenizer: Any
    kind: str = "causal"
    add_bos: bool = False
    device: str = "cpu"
    revision: str | None = None
    max_length: int | None = None
    # how it was loaded (source, path, revision, dtype, device, kernel): with a weights
    # checksum, the identity of its passes in a PassMemo (ragrepro.models.passes)
    load_key: str | None = None
    pass_memo: PassMemo | None = None
    memo_identity: tuple | None = None

    def share_passes(self) -> bool:
        """Replay identical batches from the process's pass memo (frozen models only: the
        caller promises not to change the weights afterwards). False when the memo is off,
        the model is not on the CPU or was not loaded by load_lm."""
        memo = shared_memo()
        if memo is None or self.load_key is None or device_type(self.device) != "cpu":
            return False
        try:
            checksum = weights_checksum(self.model)
        except Exception as e:  # noqa: BLE001 - an optimisation must not stop the cell
            log.warning("Pass memo off for %s: its weights could not be checksummed (%s: %s); "
                        "the cell computes every pass", self.name, type(e).__name__, e)
            return False
        self.pass_memo = memo
        self.memo_identity = (self.load_key, checksum)
        return True

    # -- tokens ---------------------------------------------------------------------------
    @property
    def bos_id(self) -> int | None:
        return self.tokenizer.bos_token_id

    @property
    def eos_id(self) -> int | None:
        return self.tokenizer.eos_token_id

    def encode(self, text: str, add_bos: bool | None = None) -> list[int]:
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if (self.add_bos if add_bos is None else add_bos) and self.bos_id is not None:
            ids = [self.bos_id] + ids
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        # Set explicitly: the library default of clean_up_tokenization_spaces has changed
        # across versions, and it changes query strings and therefore BM25 results.
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens,
                                     clean_up_tokenization_spaces=False)

    @property
    def context_size(self) -> int:
        cfg = self.model.config
        for key in ("max_position_embeddings", "n_positions", "n_ctx"):
            if getattr(cfg, key, None):
                return int(getattr(cfg, key))
        return self.max_length or 1024

    # -- scoring --------------------------------------------------------------------------
    @torch.no_grad()
    def score_targets(self, inputs: Sequence[Sequence[int]], target_starts: Sequence[int],
                      batch_size: int = 8) -> list[np.ndarray]:
        """Log-probabilities (float64, nats) of tokens inputs[i][target_starts[i]:] given all
        tokens before them. Rows are batched by length; vocabulary logits are computed only at
        the scored positions, which matters for 262k-token vocabularies."""
        if self.kind != "causal":
            raise ConfigError("score_targets is for causal LMs; use score_seq2seq.")
        out: list[np.ndarray | None] = [None] * len(inputs)
        order = sorted(range(len(inputs)), key=lambda i: -len(inputs[i]))
        for b in range(0, len(order), batch_size):
            idx = order[b:b + batch_size]
            for i, lp in zip(idx, self._score_batch([inputs[i] for i in idx],
                                                   [target_starts[i] for i in idx])):
                out[i] = lp
        bad = [i for i, lp in enumerate(out) if lp is not None and not np.all(np.isfinite(lp))]
        if bad:
            raise NumericsError(f"non-finite log-probability from {self.name} in input row(s) "
                                f"{bad}", rows=bad)
        return out  # type: ignore[return-value]

    def _score_batch(self, rows: list[Sequence[int]], starts: list[int]) -> list[np.ndarray]:
        for r, s in zip(rows, starts):
            if not 1 <= s <= len(r):
                raise ConfigError(f"target start {s} outside 1..{len(r)}: a scored token needs "
                                  f"at least one token before it.")
        width = max(len(r) for r in rows)
        pad = self.tokenizer.pad_token_id or 0
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for j, r in enumerate(rows):  # right padding keeps real tokens' positions 0..n-1
            ids[j, :len(r)] = torch.tensor(list(r))
            mask[j, :len(r)] = 1
        hidden = self._body(ids, mask)
        rows_idx, pos_idx, tgt = [], [], []
        for j, (r, s) in enumerate(zip(rows, starts)):
            n = len(r) - s
            rows_idx += [j] * n
            pos_idx += list(range(s - 1, len(r) - 1))
            tgt += list(r[s:])
        logits = self._head(hidden[torch.tensor(rows_idx), torch.tensor(pos_idx)])
        logp = torch.log_softmax(logits.float(), dim=-1)
        picked = logp[torch.arange(len(tgt)), torch.tensor(tgt, device=logp.device)]
        picked = picked.double().cpu().numpy()
        out, k = [], 0
        for r, s in zip(rows, starts):
            n = len(r) - s
            out.append(picked[k:k + n])
            k += n
        return out

    def _body(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The last hidden states of one batch; from the pass memo when attached (eval mode
        only: dropout would make two passes differ)."""
        def run() -> torch.Tensor:
            return self.model.base_model(input_ids=ids.to(self.device),
                                         attention_mask=mask.to(self.device)).last_hidden_state
        if self.pass_memo is None or self.model.training:
            return run()
        ident = (self.memo_identity, torch.get_num_threads())
        rows = [(*ident, r) for r in row_keys(ids, mask)] if rows_enabled() else None
        return self.pass_memo.get_or_run((*ident, batch_key(ids, mask)), run, rows)

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.model.get_output_embeddings()(hidden)
        cap = getattr(self.model.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    @torch.no_grad()
    def full_logprobs(self, ids: Sequence[int]) -> torch.Tensor:
        """[T, V] log-softmax of the plain forward pass (reference path for tests)."""
        logits = self.model(torch.tensor([list(ids)], device=self.device)).logits[0]
        return torch.log_softmax(logits.float(), dim=-1)

    @torch.no_grad()
    def score_seq2seq(self, sources: Sequence[str], targets: Sequence[str],
                      batch_size: int = 8) -> list[np.ndarray]:
        """Per-token log-probs of each target given its source (teacher forcing, EOS included)."""
        out: list[np.ndarray] = []
        for b in range(0, len(sources), batch_size):
            enc = self.tokenizer(list(sources[b:b + batch_size]), return_tensors="pt",
                                 padding=True, truncation=True).to(self.device)
            lab = self.tokenizer(list(targets[b:b + batch_size]), return_tensors="pt",
                                 padding=True).input_ids.to(self.device)
            mask = lab != self.tokenizer.pad_token_id
            logits = self.model(**enc, labels=lab.masked_fill(~mask, -100)).logits
            logp = torch.log_softmax(logits.float(), -1).gather(-1, lab.unsqueeze(-1))[..., 0]
            for row, m in zip(logp, mask):
                out.append(row[m].double().cpu().numpy())
        return out

    # -- generation -----------------------------------------------------------------------
    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                 logits_processor: Any = None, batch_size: int = 8, **kwargs: Any) -> list[list[int]]:
        """New tokens only, EOS and padding stripped (see `generate_with_finish`)."""
        return [ids for ids, _ in self.generate_with_finish(
            prompts, max_new_tokens, logits_processor, batch_size, **kwargs)]

    @torch.no_grad()
    def generate_with_finish(self, prompts: Sequence[Sequence[int]], max_new_tokens: int,
                             logits_processor: Any = None, batch_size: int = 8,
                             **kwargs: Any) -> list[tuple[list[int], str]]:
        """(new tokens, finish reason) per prompt; the reason is read from the raw row before
        EOS stripping (ragrepro.generation.finish_reason: eos / stop / length). Greedy unless
        the caller asks otherwise (do_sample=False is explicit, because a checkpoint's
        generation_config may carry sampling settings)."""
        kwargs.setdefault("do_sample", False)
        kwargs.setdefault("num_beams", 1)
        if not kwargs["do_sample"]:
            kwargs.update(temperature=None, top_p=None, top_k=None)
        pad = self.tokenizer.pad_token_id
        pad = pad if pad is not None else (self.eos_id or 0)
        results: list[list[int]] = []
        for b in range(0, len(prompts), batch_size):
            chunk = [list(p) for p in prompts[b:b + batch_size]]
            width = max(len(p) for p in chunk)
            if self.kind == "causal":  # left padding so every prompt ends at the same column
                ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk])
                mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk])
            else:
                ids = torch.tensor([p + [pad] * (width - len(p)) for p in chunk])
                mask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p in chunk])
            gen = self.model.generate(input_ids=ids.to(self.device),
                                      attention_mask=mask.to(self.device),
                                      max_new_tokens=max_new_tokens, pad_token_id=pad,
                                      logits_processor=logits_processor, **kwargs)
            new = gen[:, width:] if self.kind == "causal" else gen[:, 1:]
            for row in new.tolist():
                kept = _strip_after_eos(row, self.eos_id, pad)
                results.append((kept, finish_reason(_unpad(row, pad, self.eos_id),
                                                    self.eos_id, max_new_tokens)))
        return results


def _unpad(row: list[int], pad: int, eos: int | None) -> list[int]:
    """A batch row without the right padding added after it ended (pad == eos keeps one)."""
    end = len(row)
    while end and row[end - 1] == pad:
        end -= 1
    return row[:end + 1] if pad == eos and end < len(row) else row[:end]


def _strip_after_eos(row: list[int], eos: int | None, pad: int) -> list[int]:
    out = []
    for t in row:
        if t == eos:
            break
        out.append(t)
    while out and out[-1] == pad and pad != eos:
        out.pop()
    return out


def load_lm(name: str, source: str, kind: str = "causal", add_bos: bool = False,
            dtype: str = "float32", device: str | None = "auto", revision: str | None = None,
            trust_remote_code: bool = False, device_map: str | None = None,
            max_length: int | None = None, checkpoint_dtype: str = "float32",
            attn_implementation: str | None = None, **_: Any) -> LM:
    """Load a model from config. `device_map="auto"` spreads a model over several GPUs.
    dtype=checkpoint loads in the dtype the checkpoint's config.json declares
    (`checkpoint_dtype`), as the official In-Context RALM code does (float16 for OPT/LLaMA).
    `attn_implementation` (eager, sdpa, flash_attention_2; None: transformers' choice) picks
    the attention kernel. What was loaded (resolved revision, device, kernel) is reported to
    ragrepro.lock, which checks it against an active lock file and gives it to the row."""
    # deferred: transformers (seconds to import); modules that only type against LM skip it
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM

    dtype = effective_dtype(dtype, checkpoint_dtype)
    if dtype not in DTYPES:
        raise ConfigError(f"dtype={dtype!r}; use one of {sorted(DTYPES)}.")
    if kind not in ("causal", "seq2seq"):
        raise ConfigError(f"model.kind={kind!r}; use 'causal' or 'seq2seq'.")
    attn = check_attn_implementation(attn_implementation)
    path, local = resolve_source(source, kind)
    dev = pick_device(device)
    cls = AutoModelForCausalLM if kind == "causal" else AutoModelForSeq2SeqLM
    tok, model = load_pretrained(cls, path, source, local, dev, DTYPES[dtype], device_map,
                                 attn_implementation=attn, revision=revision,
                                 trust_remote_code=trust_remote_code)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    resolved = model_id(source, revision)
    kernel = getattr(model.config, "_attn_implementation", None) or attn
    log.info("Loaded %s (%s @ %s, %s, %s, attention %s, %.0fM params)", name, source,
             resolved or revision, dtype, dev, kernel,
             sum(p.numel() for p in model.parameters()) / 1e6)
    check_loaded("model", source, revision, resolved, device=device_type(dev),
                 attn_implementation=kernel)
    return LM(name=name, model=model, tokenizer=tok, kind=kind, add_bos=add_bos, device=dev,
              revision=revision, max_length=max_length,
              load_key=f"{source}|{path}|{resolved or revision}|{dtype}|{dev}|{kernel}")
