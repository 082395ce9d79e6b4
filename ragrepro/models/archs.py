"""Architecture sizes of the paper models, from each checkpoint's config.json on the hub, so
`ragrepro plan` can count parameters without downloading anything: the config is built
here and the model instantiated on PyTorch's meta device (no memory, no weights)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import torch

from ..errors import ConfigError


@dataclass(frozen=True)
class HubModel:
    """What a hub checkpoint is (its config.json and tokenizer_config.json): the class a
    rehearsal stand-in must have, and what `ragrepro plan` instantiates on the meta device."""

    architecture: str      # transformers class named in the real config's `architectures`
    tokenizer: str         # fast tokenizer class the real checkpoint loads with
    family: str            # tokenizer model/special-token layout: gpt2 | opt | llama | t5 | bert | roberta
    context: int           # the real model's context length (positions)


_GPT2 = ("GPT2TokenizerFast", "gpt2")
# Ordered (prefix of the hub id, spec); the first match wins. Facts from each checkpoint's
# config.json / tokenizer_config.json on the hub.
HUB_MODELS: tuple[tuple[str, HubModel], ...] = (
    ("gpt2", HubModel("GPT2LMHeadModel", *_GPT2, 1024)),
    ("facebook/opt-", HubModel("OPTForCausalLM", "GPT2TokenizerFast", "opt", 2048)),
    ("EleutherAI/gpt-neo-", HubModel("GPTNeoForCausalLM", *_GPT2, 2048)),
    ("EleutherAI/gpt-j-", HubModel("GPTJForCausalLM", *_GPT2, 2048)),
    ("huggyllama/", HubModel("LlamaForCausalLM", "LlamaTokenizerFast", "llama", 2048)),
    ("meta-llama/Llama-2-", HubModel("LlamaForCausalLM", "LlamaTokenizerFast", "llama", 4096)),
    ("google/flan-t5-", HubModel("T5ForConditionalGeneration", "T5TokenizerFast", "t5", 512)),
    ("google/t5_xxl_true_nli_mixture", HubModel("T5ForConditionalGeneration", "T5TokenizerFast",
                                                "t5", 512)),
    ("roberta-", HubModel("RobertaModel", "RobertaTokenizerFast", "roberta", 514)),
    ("FacebookAI/roberta-", HubModel("RobertaModel", "RobertaTokenizerFast", "roberta", 514)),
    ("bert-base-uncased", HubModel("BertModel", "BertTokenizerFast", "bert", 512)),
    ("facebook/contriever", HubModel("BertModel", "BertTokenizerFast", "bert", 512)),
    ("facebook/dpr-question_encoder-", HubModel("DPRQuestionEncoder",
                                                "DPRQuestionEncoderTokenizerFast", "bert", 512)),
    ("facebook/dpr-ctx_encoder-", HubModel("DPRContextEncoder", "DPRContextEncoderTokenizerFast",
                                           "bert", 512)),
    ("tau/spider", HubModel("DPRContextEncoder", "DPRContextEncoderTokenizerFast", "bert", 512)),
    ("sentence-transformers/all-MiniLM-", HubModel("BertModel", "BertTokenizerFast", "bert", 512)),
)


def hub_model(source: str) -> HubModel:
    """The checkpoint facts of a hub id; a hub id without a row is a clear error."""
    for prefix, spec in HUB_MODELS:
        if source == prefix or source.startswith(prefix):
            return spec
    raise ConfigError(f"No checkpoint facts (rehearsal stand-in, plan) for model {source!r}: "
                      f"add its architecture class and tokenizer type to HUB_MODELS in "
                      f"ragrepro/models/archs.py.")


def _gpt2(n_embd: int, n_layer: int, n_head: int) -> tuple[str, dict]:
    return "GPT2Config", {"n_embd": n_embd, "n_layer": n_layer, "n_head": n_head, "vocab_size": 50257,
                              "n_positions": 1024}


def _opt(h: int, layers: int, heads: int, proj: int | None = None) -> tuple[str, dict]:
    return "OPTConfig", {"hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
                             "ffn_dim": 4 * h, "vocab_size": 50272, "max_position_embeddings": 2048,
                             "word_embed_proj_dim": proj or h}


def _llama(h: int, layers: int, heads: int, ffn: int, ctx: int = 2048) -> tuple[str, dict]:
    return "LlamaConfig", {"hidden_size": h, "num_hidden_layers": layers, "num_attention_heads": heads,
                               "intermediate_size": ffn, "vocab_size": 32000,
                               "max_position_embeddings": ctx}


def _t5(d: int, ff: int, heads: int) -> tuple[str, dict]:
    return "T5Config", {"d_model": d, "d_ff": ff, "d_kv": 64, "num_heads": heads, "num_layers": 24,
                            "vocab_size": 32128, "feed_forward_proj": "gated-gelu",
                            "tie_word_embeddings": False}


_BERT = ("BertConfig", {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                            "intermediate_size": 3072, "vocab_size": 30522})
_DPR = ("DPRConfig", dict(_BERT[1]))
# hub id -> (config class, sizes); the stand-in table (rehearsal) names the model class.
ARCHS: dict[str, tuple[str, dict]] = {
    "gpt2": _gpt2(768, 12, 12), "gpt2-medium": _gpt2(1024, 24, 16),
    "gpt2-large": _gpt2(1280, 36, 20), "gpt2-xl": _gpt2(1600, 48, 25),
    "facebook/opt-125m": _opt(768, 12, 12), "facebook/opt-350m": _opt(1024, 24, 16, 512),
    "facebook/opt-1.3b": _opt(2048, 24, 32), "facebook/opt-2.7b": _opt(2560, 32, 32),
    "facebook/opt-6.7b": _opt(4096, 32, 32), "facebook/opt-13b": _opt(5120, 40, 40),
    "facebook/opt-30b": _opt(7168, 48, 56), "facebook/opt-66b": _opt(9216, 64, 72),
    "EleutherAI/gpt-neo-1.3B": ("GPTNeoConfig", {
        "hidden_size": 2048, "num_layers": 24, "num_heads": 16, "vocab_size": 50257,
        "attention_types": [[["global", "local"], 12]], "max_position_embeddings": 2048}),
    "EleutherAI/gpt-neo-2.7B": ("GPTNeoConfig", {
        "hidden_size": 2560, "num_layers": 32, "num_heads": 20, "vocab_size": 50257,
        "attention_types": [[["global", "local"], 16]], "max_position_embeddings": 2048}),
    "EleutherAI/gpt-j-6b": ("GPTJConfig", {"n_embd": 4096, "n_layer": 28, "n_head": 16,
                                                "rotary_dim": 64, "vocab_size": 50400,
                                                "n_positions": 2048}),
    "huggyllama/llama-7b": _llama(4096, 32, 32, 11008),
    "huggyllama/llama-13b": _llama(5120, 40, 40, 13824),
    "huggyllama/llama-30b": _llama(6656, 60, 52, 17920),
    "meta-llama/Llama-2-7b-hf": _llama(4096, 32, 32, 11008, 4096),
    "google/flan-t5-xl": _t5(2048, 5120, 32),
    "google/t5_xxl_true_nli_mixture": _t5(4096, 10240, 64),
    "roberta-base": ("RobertaConfig", {"hidden_size": 768, "num_hidden_layers": 12,
                                           "num_attention_heads": 12, "intermediate_size": 3072,
                                           "vocab_size": 50265, "max_position_embeddings": 514}),
    "bert-base-uncased": _BERT, "facebook/contriever": _BERT,
    "facebook/dpr-question_encoder-single-nq-base": _DPR,
    "facebook/dpr-ctx_encoder-single-nq-base": _DPR, "tau/spider": _DPR,
}


def hub_config(source: str) -> Any:
    """The transformers config of a hub model, built from ARCHS (no download)."""
    import transformers as tf  # deferred: transformers (seconds; the retrievers import this module)

    if source not in ARCHS:
        raise ConfigError(f"No architecture sizes for {source!r}: add its config.json sizes to "
                          f"ARCHS in ragrepro/models/archs.py, or download it first.")
    cls, kw = ARCHS[source]
    return getattr(tf, cls)(**kw)


@lru_cache(maxsize=64)
def count_parameters(source: str, architecture: str) -> int:
    """Parameters of `architecture` with the sizes of `source`, counted on the meta device."""
    import transformers as tf  # deferred: transformers (as in hub_config)

    config = hub_config(source)
    with torch.device("meta"):
        model = getattr(tf, architecture)(config)
    return sum(p.numel() for p in model.parameters())


@lru_cache(maxsize=64)
def matmul_parameters(source: str, architecture: str) -> tuple[int, int]:
    """(body, head): the parameters a forward pass multiplies at every position (every
    layer; not the token and position embedding tables, which are looked up) and those of
    the vocabulary head (vocabulary x width; the token embedding itself when the two are
    tied). A scoring pass costs 2 x body FLOPs a token plus 2 x head at each position whose
    logits it computes (ragrepro.plan.scoring_seconds)."""
    import transformers as tf  # deferred: transformers (as in hub_config)

    with torch.device("meta"):
        model = getattr(tf, architecture)(hub_config(source))
    out = model.get_output_embeddings()
    head = out.weight.numel() if out is not None else 0
    tables = {id(m.weight): m.weight.numel() for m in model.modules()
              if isinstance(m, torch.nn.Embedding)}
    if out is not None:
        tables[id(out.weight)] = head
    total = sum(p.numel() for p in model.parameters())
    return total - sum(tables.values()), head


def model_dims(source: str) -> dict[str, int]:
    """hidden size, layers and vocabulary (for the activation estimate)."""
    c = hub_config(source)
    hidden = getattr(c, "hidden_size", None) or getattr(c, "n_embd", None) or c.d_model
    layers = getattr(c, "num_hidden_layers", None) or getattr(c, "n_layer", None) \
        or getattr(c, "num_layers", None)
    return {"hidden": int(hidden), "layers": int(layers), "vocab": int(c.vocab_size)}
