"""Small tokenizers of each real tokenizer type, trained on the fly on embedded text.

Each family keeps the real one's model type (byte-level BPE, SentencePiece-style BPE with
byte fallback, Unigram, WordPiece), special tokens, their ids where code depends on them
(T5 pad=0 as decoder start; LLaMA <s>=1) and whether BOS/EOS are added, and is wrapped in
the real fast tokenizer class, so tokenizer-dependent code paths run as on the real model."""
from __future__ import annotations

from typing import Any

import transformers as tf
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

from ..data.vital import load_articles

# family -> (special tokens in id order, template for one sequence, tokenizer kwargs)
SPECIALS: dict[str, tuple[list[str], str | None, dict[str, str]]] = {
    "gpt2": (["<|endoftext|>"], None,
             {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>",
              "unk_token": "<|endoftext|>"}),
    # OPT's GPT2Tokenizer prepends </s> (id 2) as BOS; pad is id 1.
    "opt": (["<s>", "<pad>", "</s>", "<unk>"], "</s> $A",
            {"bos_token": "</s>", "eos_token": "</s>", "pad_token": "<pad>",
             "unk_token": "</s>"}),
    "llama": (["<unk>", "<s>", "</s>"], "<s> $A",
              {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}),
    "t5": (["<pad>", "</s>", "<unk>"], "$A </s>",
           {"pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>"}),
    "roberta": (["<s>", "<pad>", "</s>", "<unk>", "<mask>"], "<s> $A </s>",
                {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                 "unk_token": "<unk>", "cls_token": "<s>", "sep_token": "</s>",
                 "mask_token": "<mask>"}),
    "bert": (["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "[CLS] $A [SEP]",
             {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
              "sep_token": "[SEP]", "mask_token": "[MASK]"}),
}
PAIR = {"[CLS] $A [SEP]": "[CLS] $A [SEP] $B:1 [SEP]:1", "<s> $A </s>": "<s> $A </s> </s> $B </s>",
        "$A </s>": "$A </s> $B </s>", "<s> $A": "<s> $A <s> $B", "</s> $A": "</s> $A </s> $B"}


def training_texts(n: int = 400) -> list[str]:
    """Embedded Wikipedia leads plus the prompt words the pipelines use."""
    texts = [str(a["extract"]) for a in load_articles()[:n]]
    # RICHES's markers " <<" / " >>" are single tokens in the real LLaMA and GPT-2
    # vocabularies; repeating them makes BPE learn them too.
    return texts + ["question: context: answer: claim: SUPPORTS REFUTES yes no Title: Q: A:",
                    "Evidence: << a key >> Evidence: << another key >>"] * 20


def _core(family: str, vocab: int, specials: list[str]):
    if family in ("gpt2", "opt", "roberta"):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer: Any = trainers.BpeTrainer(vocab_size=vocab, special_tokens=specials,
                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    elif family == "llama":
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        bytes_ = [f"<0x{i:02X}>" for i in range(256)]
        trainer = trainers.BpeTrainer(vocab_size=vocab + 256, special_tokens=specials + bytes_)
    elif family == "t5":
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
        tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
        trainer = trainers.UnigramTrainer(vocab_size=vocab, special_tokens=specials,
                                          unk_token="<unk>")
    elif family == "bert":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab, special_tokens=specials)
    else:
        raise ValueError(f"unknown tokenizer family {family!r}")
    return tok, trainer


def build_tokenizer(family: str, cls_name: str, vocab: int, context: int):
    """A trained tokenizer of `family`, wrapped in transformers' `cls_name`."""
    specials, template, kw = SPECIALS[family]
    tok, trainer = _core(family, vocab, specials)
    tok.train_from_iterator(training_texts(), trainer=trainer)
    if template:
        ids = [(s, tok.token_to_id(s)) for s in specials if s in template or s in PAIR[template]]
        tok.post_processor = processors.TemplateProcessing(single=template, pair=PAIR[template],
                                                           special_tokens=ids)
    cls = getattr(tf, cls_name)
    return cls(tokenizer_object=tok, model_max_length=context, **kw)
