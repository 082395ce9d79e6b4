"""A tiny randomly initialised T5 with a byte-level BPE tokenizer trained on the fly.

No T5 checkpoint is available offline, so the seq2seq code paths (Flan-T5 in the paper) are
exercised on this model: it checks the plumbing (prompts, masking, batching, generation), not
the quality. Built once per settings and cached (safetensors)."""
from __future__ import annotations

import logging
import shutil
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

from ragrepro.data.vital import load_articles
from ragrepro.hashing import hash_obj
from ragrepro.io import private_tmp, publish_dir
from ragrepro.models import load_lm
from ragrepro.paths import cache_dir

log = logging.getLogger(__name__)

SPECIAL = ["<pad>", "</s>", "<unk>"]  # T5 convention: pad=0 (also decoder start), eos=1


def _tokenizer_texts(n_articles: int) -> list[str]:
    texts = [a["extract"] for a in load_articles()[:n_articles]]
    texts += [("Given the ['question', 'context'], predict the most helpful sentence in the "
              "context.\n\nquestion: context: answer: response: judgement: claim: query: "
              "SUPPORTS REFUTES yes no")] * 20
    return texts


def build_tiny_t5(folder: Path, vocab_size: int, d_model: int, layers: int, heads: int,
                  n_articles: int, seed: int) -> None:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(_tokenizer_texts(n_articles), trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A </s> $B </s>",
                                                       special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                                   unk_token="<unk>", model_max_length=1024)
    torch.manual_seed(seed)
    config = T5Config(vocab_size=tok.get_vocab_size(), d_model=d_model, d_kv=d_model // heads,
                      d_ff=4 * d_model, num_layers=layers, num_decoder_layers=layers,
                      num_heads=heads, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0,
                      tie_word_embeddings=False)
    model = T5ForConditionalGeneration(config)
    tmp = private_tmp(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    fast.save_pretrained(tmp)
    publish_dir(tmp, folder, complete="config.json")


def tiny_t5_dir(vocab_size: int = 2000, d_model: int = 64, layers: int = 2, heads: int = 4,
                n_articles: int = 2000, seed: int = 0) -> Path:
    settings = {"vocab_size": vocab_size, "d_model": d_model, "layers": layers, "heads": heads,
                    "n_articles": n_articles, "seed": seed, "v": 1}
    folder = cache_dir() / "models" / f"tiny-t5-random-{hash_obj(settings)}"
    if not (folder / "config.json").exists():
        folder.parent.mkdir(parents=True, exist_ok=True)
        log.info("Building a tiny random T5 and training its tokenizer (once): %s", folder)
        build_tiny_t5(folder, **{k: v for k, v in settings.items() if k != "v"})
    return folder


def load_tiny_t5(name: str = "tiny-t5-random", dtype: str = "float32", device: str = "cpu",
                 vocab_size: int = 2000, d_model: int = 64, layers: int = 2, heads: int = 4,
                 n_articles: int = 2000, seed: int = 0, **_):
    """An `LM` (kind=seq2seq) around the tiny random T5; config-instantiable."""
    folder = tiny_t5_dir(vocab_size, d_model, layers, heads, n_articles, seed)
    return load_lm(name, str(folder), kind="seq2seq", add_bos=False, dtype=dtype,
                   device=device, revision=f"random-init-seed{seed}")
