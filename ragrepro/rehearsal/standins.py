"""Stand-in models: for each hub model a tiny randomly initialised model of the same
transformers architecture class and tokenizer type, built locally (never downloaded).

A rehearsal (docs/rehearsal.md) runs a paper-scale config on CPU with these in place of the
real weights: every line of model code runs (class-specific attention, generation, LoRA
targets, tokenizer specials), only the numbers are meaningless. `standin_spec` is pure; the
builder trains a small tokenizer on fixture text with the `tokenizers` library and saves the
model folder once in the cache."""
from __future__ import annotations

import logging
import os
import shutil
from dataclasses import asdict
from pathlib import Path

import torch
import transformers as tf

from ..hashing import hash_obj
from ..models.archs import HUB_MODELS, HubModel, hub_model
from .tokenizers import build_tokenizer

log = logging.getLogger(__name__)

HIDDEN, LAYERS, HEADS, VOCAB = 64, 2, 4, 800


# What a stand-in must match is what the real checkpoint is: its architecture class,
# tokenizer type, family and context (the hub facts live in ragrepro.models.archs, which
# `ragrepro plan` reads too; production code never imports this module).
StandIn = HubModel
STANDINS = HUB_MODELS
standin_spec = hub_model


def needs_standin(source: str) -> bool:
    """Hub ids are swapped; embedded models, local folders and .gguf files are already local."""
    return not (source.startswith(("embedded:", ".", "/", "~")) or source.endswith(".gguf")
                or Path(source).expanduser().exists())


def standin_name(name: str) -> str:
    return name if name.endswith("(stand-in)") else f"{name} (stand-in)"


def standin_dir(source: str, cache: Path) -> Path:
    """The stand-in's folder (built once): from_pretrained loads it like the real one."""
    spec = standin_spec(source)
    key = hash_obj({**asdict(spec), "h": HIDDEN, "l": LAYERS, "v": VOCAB, "version": 2})
    folder = cache / "standins" / f"{source.replace('/', '--')}-{key}"
    if not (folder / "config.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tok = build_tokenizer(spec.family, spec.tokenizer, VOCAB, spec.context)
        model = build_model(spec, tok)
        model.config.ragrepro_standin_for = source
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
        log.info("Built the stand-in for %s (%s, %s) in %s", source, spec.architecture,
                 spec.tokenizer, folder)
    return folder


def model_config(spec: StandIn, tok) -> object:
    """A tiny config of the real architecture's config class, with the tokenizer's ids."""
    ids = {"vocab_size": len(tok), "pad_token_id": tok.pad_token_id,
           "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id}
    arch = spec.architecture
    if arch == "GPT2LMHeadModel":
        return tf.GPT2Config(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS,
                             n_positions=spec.context, **ids)
    if arch == "OPTForCausalLM":
        return tf.OPTConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                            num_attention_heads=HEADS, ffn_dim=4 * HIDDEN, word_embed_proj_dim=HIDDEN,
                            max_position_embeddings=spec.context, **ids)
    if arch == "GPTNeoForCausalLM":
        return tf.GPTNeoConfig(hidden_size=HIDDEN, num_layers=LAYERS, num_heads=HEADS,
                               attention_types=[[["global", "local"], LAYERS // 2]],
                               window_size=256, max_position_embeddings=spec.context, **ids)
    if arch == "GPTJForCausalLM":
        return tf.GPTJConfig(n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, rotary_dim=8,
                             n_positions=spec.context, **ids)
    if arch == "LlamaForCausalLM":
        return tf.LlamaConfig(hidden_size=HIDDEN, intermediate_size=4 * HIDDEN,
                              num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                              max_position_embeddings=spec.context, **ids)
    if arch == "T5ForConditionalGeneration":
        return tf.T5Config(d_model=HIDDEN, d_kv=HIDDEN // HEADS, d_ff=4 * HIDDEN,
                           num_layers=LAYERS, num_heads=HEADS, decoder_start_token_id=0,
                           **{**ids, "bos_token_id": None})
    if arch == "RobertaModel":
        return tf.RobertaConfig(hidden_size=HIDDEN, num_hidden_layers=LAYERS,
                                num_attention_heads=HEADS, intermediate_size=4 * HIDDEN,
                                max_position_embeddings=spec.context, **ids)
    kind = tf.DPRConfig if arch.startswith("DPR") else tf.BertConfig
    return kind(hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                intermediate_size=4 * HIDDEN, max_position_embeddings=spec.context,
                **{k: v for k, v in ids.items() if k in ("vocab_size", "pad_token_id")})


def build_model(spec: StandIn, tok):
    """A randomly initialised (seed 0) model of `spec.architecture`."""
    torch.manual_seed(0)
    config = model_config(spec, tok)
    config.architectures = [spec.architecture]
    return getattr(tf, spec.architecture)(config)
