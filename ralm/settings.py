"""Typed settings of the In-Context RALM pipelines, built by Hydra from the `_target_` of their
YAML nodes: `ralm:` (conf/ralm/base.yaml), `qa:` (the QA experiments), `reranker:`
(conf/reranker/*.yaml). No field has a default: the defaults live in the YAML only, so a
renamed, misspelt or missing key fails when the pipeline is built (ragrepro.pipeline turns it
into a ConfigError), not silently at run time."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ragrepro.errors import ConfigError
from ragrepro.metrics.perplexity import WORD_COUNT_RULES
from ragrepro.validate import limits

STREAMS = ("joined", "per_document")


def _one_of(key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{key}={value!r}; use one of {choices}.")


@dataclass(frozen=True)
class RalmSettings:
    """`ralm.*`: language modelling with retrieval (paper §3-§6); see conf/ralm/base.yaml."""

    max_length: int = field(metadata=limits(min=2))
    stride: int = field(metadata=limits(min=1))  # and <= max_length - 1 (checked with the model)
    retrieval_stride: int | None = field(metadata=limits(min=1))
    query_len: int = field(metadata=limits(min=1))
    query_clean_spaces: bool
    doc_max_tokens: int = field(metadata=limits(min=1))
    k: int = field(metadata=limits(min=1))
    rerank: str
    rerank_tokens: int = field(metadata=limits(min=1))
    word_count: str = field(metadata=limits(choices=WORD_COUNT_RULES))
    stream: str = field(metadata=limits(choices=STREAMS))
    window_bos: bool | str = field(metadata=limits(choices=("auto",)))
    forbidden_titles: str | None
    retrieval_file: str | None
    batch_windows: int = field(metadata=limits(min=1))
    near_dup: bool
    near_dup_ngram: int = field(metadata=limits(min=1))
    near_dup_threshold: float = field(metadata=limits(min=0, max=1))

    def __post_init__(self) -> None:
        _one_of("ralm.word_count", self.word_count, WORD_COUNT_RULES)
        _one_of("ralm.stream", self.stream, STREAMS)
        if isinstance(self.window_bos, str) and self.window_bos != "auto":
            raise ConfigError(f"ralm.window_bos={self.window_bos!r}; use auto, true or false.")

    def window_bos_for(self, model_adds_bos: bool) -> bool:
        """`auto`: a BOS over position 0 of document-less windows iff the model adds one."""
        return bool(model_adds_bos) if self.window_bos == "auto" else bool(self.window_bos)


@dataclass(frozen=True)
class QASettings:
    """`qa.*`: open-domain QA (paper §5, official eval_qa.py); see conf/experiment/ralm/table4."""

    num_docs: int = field(metadata=limits(min=0))  # documents in the prompt (0 = closed book)
    doc_source: str          # auto | dataset (the record's ctxs) | retrieve
    normalize_question: bool
    max_new_tokens: int = field(metadata=limits(min=1))
    context_margin: int = field(metadata=limits(min=0))  # prompt kept to context_size - margin tokens
    strip_prompt: str        # tokens | chars (official)
    prompt_bos: str | bool   # tokenizer (official) | model | true | false
    batch_size: int = field(metadata=limits(min=1))  # official: 1; >1 batches with left padding

    def __post_init__(self) -> None:
        if int(self.num_docs) < 0:
            raise ConfigError(f"qa.num_docs={self.num_docs} must be >= 0.")
        _one_of("qa.doc_source", self.doc_source, ("auto", "dataset", "retrieve"))
        _one_of("qa.strip_prompt", self.strip_prompt, ("tokens", "chars"))
        _one_of("qa.prompt_bos", str(self.prompt_bos).lower(),
                ("tokenizer", "model", "true", "false"))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RerankerSettings:
    """`reranker.*`: the predictive reranker's training (paper §6.2); see conf/reranker/.
    Its encoder is a composed conf/encoder node; its labelling LM is the top-level
    `label_model` node (absent: the evaluated LM)."""

    encoder: dict[str, Any]
    arch: str
    max_length: int = field(metadata=limits(min=1))
    prefix_tokens: int | None = field(metadata=limits(min=1))
    train_source: str
    train_split: str
    train_texts: int = field(metadata=limits(min=1))
    examples_per_text: int = field(metadata=limits(min=1))
    min_prefix: int = field(metadata=limits(min=1))
    n_examples: int = field(metadata=limits(min=1))
    steps: int = field(metadata=limits(min=1))
    batch_size: int = field(metadata=limits(min=1))
    lr: float = field(metadata=limits(above=0))
    weight_decay: float = field(metadata=limits(min=0))
    warmup_ratio: float = field(metadata=limits(min=0, max=1))
    loss: str
    temperature: float = field(metadata=limits(above=0))
    heldout_fraction: float = field(metadata=limits(min=0, max=1))
    seed: int = field(metadata=limits(min=0))

    def __post_init__(self) -> None:
        # arch and loss are checked where they are used (ralm.predictive)
        _one_of("reranker.train_source", self.train_source, ("corpus", "dataset"))
