"""Fine-tuning M_ctx and M_gen (causal or seq2seq), with the loss on target tokens only.

Paper settings (§4.1) are the defaults: 3 epochs, lr 5e-5, batch 32, 1024-token inputs.
The official train.py pads labels with the pad id (0) instead of -100, so padding enters its
loss (reference §5); `label_pad='pad_token'` reproduces that, the default `'ignore'` does not.
Causal models use LoRA (peft) like the paper's Llama-2 runs, or full fine-tuning (`lora: false`).
A trained model is saved under the cache, keyed by the base model, the training settings and
the training pairs, so a rerun (or another experiment with the same pairs) reuses it."""
from __future__ import annotations

import copy
import json
import logging
import math
import random
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from ragrepro.errors import ConfigError
from ragrepro.hashing import hash_obj
from ragrepro.io import private_tmp, publish_dir
from ragrepro.models.lm import LM
from ragrepro.paths import cache_dir

from .encoding import prompt_ids, target_ids

log = logging.getLogger(__name__)
IGNORE = -100


@dataclass(frozen=True)
class TrainConfig:
    epochs: float = 3
    lr: float = 5e-5
    batch_size: int = 32              # effective batch (micro_batch x accumulation)
    micro_batch_size: int = 8
    max_input_tokens: int = 1024
    max_target_tokens: int = 512
    max_steps: int | None = None      # cap on optimizer steps (mini scale)
    lora: bool = True                 # causal models only
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    label_pad: str = "ignore"         # ignore (-100) | pad_token (official code's behaviour)
    weight_decay: float = 0.0
    seed: int = 0

    def check(self) -> None:
        if self.label_pad not in ("ignore", "pad_token"):
            raise ConfigError(f"label_pad={self.label_pad!r}; use 'ignore' or 'pad_token'.")
        if self.batch_size % self.micro_batch_size:
            raise ConfigError(f"batch_size {self.batch_size} must be a multiple of "
                              f"micro_batch_size {self.micro_batch_size}.")


@dataclass(frozen=True)
class Encoded:
    source: list[int]   # causal: the prompt; seq2seq: the encoder input
    target: list[int]


def encode_pairs(lm: LM, pairs: Sequence[tuple[str, str]], tc: TrainConfig) -> list[Encoded]:
    return [Encoded(prompt_ids(lm, s, tc.max_input_tokens), target_ids(lm, t, tc.max_target_tokens))
            for s, t in pairs]


def causal_batch(items: Sequence[Encoded], pad_id: int, label_pad: str = "ignore",
                 max_len: int | None = None) -> dict[str, torch.Tensor]:
    """Right-padded prompt+target rows; labels are the target tokens, -100 on the prompt and
    on padding (or the pad id on padding, the official code's bug, with label_pad='pad_token')."""
    rows, labels = [], []
    for it in items:
        ids = it.source + it.target
        lab = [IGNORE] * len(it.source) + it.target
        if max_len is not None and len(ids) > max_len:
            ids, lab = ids[:max_len], lab[:max_len]
        rows.append(ids)
        labels.append(lab)
    width = max(len(r) for r in rows)
    fill = IGNORE if label_pad == "ignore" else pad_id
    return {
        "input_ids": torch.tensor([r + [pad_id] * (width - len(r)) for r in rows]),
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows]),
        "labels": torch.tensor([lab + [fill] * (width - len(lab)) for lab in labels]),
    }


def seq2seq_batch(items: Sequence[Encoded], pad_id: int,
                  label_pad: str = "ignore") -> dict[str, torch.Tensor]:
    ws = max(len(it.source) for it in items)
    wt = max(len(it.target) for it in items)
    fill = IGNORE if label_pad == "ignore" else pad_id
    return {
        "input_ids": torch.tensor([it.source + [pad_id] * (ws - len(it.source)) for it in items]),
        "attention_mask": torch.tensor([[1] * len(it.source) + [0] * (ws - len(it.source))
                                        for it in items]),
        "labels": torch.tensor([it.target + [fill] * (wt - len(it.target)) for it in items]),
    }


def masked_loss(logits: torch.Tensor, labels: torch.Tensor, shift: bool) -> tuple[torch.Tensor, int]:
    """Summed token cross-entropy over labelled positions and their count. Causal logits at
    position t predict token t+1 (shift=True); seq2seq decoder logits are aligned."""
    if shift:
        logits, labels = logits[:, :-1], labels[:, 1:]
    flat = labels.reshape(-1)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), flat,
                                             ignore_index=IGNORE, reduction="sum")
    return loss, int((flat != IGNORE).sum())


def causal_target_loss(model: Any, batch: dict[str, torch.Tensor], device: str) -> torch.Tensor:
    """Summed cross-entropy of the labelled tokens, computing vocabulary logits only at the
    positions that predict them (the full [B, T, V] logits dominate memory for 49k-262k
    vocabularies). Equal to masked_loss on the full logits."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = inner.base_model(input_ids=batch["input_ids"].to(device),
                              attention_mask=batch["attention_mask"].to(device)).last_hidden_state
    labels = batch["labels"].to(device)[:, 1:]
    rows, cols = torch.nonzero(labels != IGNORE, as_tuple=True)
    logits = inner.get_output_embeddings()(hidden[:, :-1][rows, cols])
    cap = getattr(inner.config, "final_logit_softcapping", None)
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return torch.nn.functional.cross_entropy(logits.float(), labels[rows, cols], reduction="sum")


def _pad_id(lm: LM) -> int:
    pad = lm.tokenizer.pad_token_id
    return int(pad if pad is not None else (lm.eos_id or 0))


def _wrap_lora(model: Any, tc: TrainConfig) -> Any:
    # peft deferred on purpose: settings.py imports this module (TrainConfig) wherever configs
    # are checked, and peft is needed only when a causal model is trained or loaded with LoRA
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=tc.lora_r, lora_alpha=tc.lora_alpha, lora_dropout=tc.lora_dropout,
                     target_modules="all-linear", task_type="CAUSAL_LM")
    return get_peft_model(model, cfg)


def _micro_batch_loss(model: Any, lm: LM, items: Sequence[Encoded], tc: TrainConfig,
                      pad: int) -> torch.Tensor:
    """Summed target-token cross-entropy of one micro-batch (causal or seq2seq)."""
    if lm.kind == "causal":
        b = causal_batch(items, pad, tc.label_pad, tc.max_input_tokens + tc.max_target_tokens)
        return causal_target_loss(model, b, lm.device)
    b = seq2seq_batch(items, pad, tc.label_pad)
    dec_in = model.prepare_decoder_input_ids_from_labels(
        labels=b["labels"].clamp(min=0)).to(lm.device)
    out = model(input_ids=b["input_ids"].to(lm.device),
                attention_mask=b["attention_mask"].to(lm.device), decoder_input_ids=dec_in)
    loss, _ = masked_loss(out.logits, b["labels"].to(lm.device), shift=False)
    return loss


def _step(model: Any, lm: LM, data: Sequence[Encoded], batch_idx: Sequence[int],
          tc: TrainConfig, pad: int) -> float:
    """Forward and backward over one batch, micro-batch by micro-batch; the gradients sum to
    those of the mean over the batch's target tokens. Returns that mean loss."""
    n_tok = sum(len(data[i].target) for i in batch_idx)
    step_loss = 0.0
    for m in range(tc.batch_size // tc.micro_batch_size):
        items = [data[i] for i in batch_idx[m * tc.micro_batch_size:(m + 1) * tc.micro_batch_size]]
        if not items:
            continue
        loss = _micro_batch_loss(model, lm, items, tc, pad)
        (loss / max(1, n_tok)).backward()  # mean over the batch's target tokens
        step_loss += loss.item()
    return step_loss / max(1, n_tok)


def fine_tune(lm: LM, pairs: Sequence[tuple[str, str]], tc: TrainConfig,
              desc: str = "train") -> tuple[Any, dict]:
    """Train a copy of lm.model on (source, target) string pairs. Returns (model, log)."""
    tc.check()
    if not pairs:
        raise ConfigError(f"{desc}: no training pairs (check the training split and limit).")
    torch.manual_seed(tc.seed)
    rng = random.Random(tc.seed)
    model = copy.deepcopy(lm.model)
    use_lora = tc.lora and lm.kind == "causal"
    if use_lora:
        model = _wrap_lora(model, tc)
    model.train()
    data = encode_pairs(lm, pairs, tc)
    total = math.ceil(tc.epochs * math.ceil(len(data) / tc.batch_size))
    if tc.max_steps:
        total = min(total, tc.max_steps)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=tc.lr, weight_decay=tc.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1 - s / max(1, total)))
    pad = _pad_id(lm)
    order: list[int] = []
    losses = []
    bar = tqdm(range(total), desc=desc, leave=False)
    for _ in bar:
        opt.zero_grad()
        if len(order) < tc.batch_size:  # a fresh shuffled pass over the data
            fresh = list(range(len(data)))
            rng.shuffle(fresh)
            order += fresh
        batch_idx, order = order[:tc.batch_size], order[tc.batch_size:]
        losses.append(_step(model, lm, data, batch_idx, tc, pad))
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
    model.eval()
    return model, {"steps": total, "n_pairs": len(data), "losses": losses,
                   "lora": use_lora, "first_loss": losses[0], "last_loss": losses[-1]}


def model_key(lm: LM, tc: TrainConfig, pairs: Sequence[tuple[str, str]], role: str) -> str:
    base = [lm.name, lm.revision, lm.kind]
    dtype = str(getattr(lm.model, "dtype", "torch.float32"))
    if dtype != "torch.float32":  # float32 keys stay as they were (cached models reused)
        base.append(dtype)        # a bfloat16 base trains different weights: its own cache entry
    return hash_obj({"base": base, "train": asdict(tc), "role": role,
                     "pairs": hash_obj([list(p) for p in pairs], 32)}, 20)


def trained_lm(lm: LM, pairs: Sequence[tuple[str, str]], tc: TrainConfig, role: str,
               root: Path | None = None) -> tuple[LM, dict]:
    """The fine-tuned LM for (base, settings, pairs): loaded from the cache, or trained and
    saved (safetensors: the LoRA adapter, or the full weights without LoRA)."""
    key = model_key(lm, tc, pairs, role)
    folder = (root or cache_dir() / "filco" / "models") / f"{role}-{key}"
    info_path = folder / "train_info.json"
    if info_path.exists():
        info = json.loads(info_path.read_text())
        if info.get("lora"):
            from peft import PeftModel  # deferred: see _wrap_lora

            model = PeftModel.from_pretrained(copy.deepcopy(lm.model), folder).merge_and_unload()
        else:
            model = type(lm.model).from_pretrained(folder, dtype=lm.model.dtype)
        model = model.to(lm.device).eval()
        info["cached"] = True
        log.info("Reusing fine-tuned %s from %s", role, folder)
    else:
        model, info = fine_tune(lm, pairs, tc, desc=f"fine-tune {role}")
        tmp = private_tmp(folder)
        shutil.rmtree(tmp, ignore_errors=True)
        model.save_pretrained(tmp, safe_serialization=True)
        info.update(key=key, role=role, base=lm.name, settings=asdict(tc))
        (tmp / "train_info.json").write_text(json.dumps(info, indent=1))
        publish_dir(tmp, folder, complete="train_info.json")
        if info["lora"]:  # saved as a small adapter; merged for fast inference
            model = model.merge_and_unload().eval()
        info["cached"] = False
        log.info("Fine-tuned %s: %d steps, loss %.3f -> %.3f, saved to %s", role,
                 info["steps"], info["first_loss"], info["last_loss"], folder)
    info["path"] = str(folder)
    out = LM(name=f"{lm.name}+{role}", model=model, tokenizer=lm.tokenizer, kind=lm.kind,
             add_bos=lm.add_bos, device=lm.device, revision=f"{lm.revision}+ft-{key}",
             max_length=lm.max_length)
    return out, info
