"""Typed settings of the In-Context RALM pipelines, built by Hydra from the `_target_` of their
YAML nodes: `ralm:` (ralm/conf/ralm/base.yaml), `qa:` (the QA experiments), `reranker:`
(ralm/conf/reranker/*.yaml). No field has a default: the defaults live in the YAML only, so a
renamed, misspelt or missing key fails when the pipeline is built (ragrepro.pipeline turns it
into a ConfigError), not silently at run time."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragrepro.errors import ConfigError
from ragrepro.metrics.perplexity import WORD_COUNT_RULES
from ragrepro.validate import limits

from .rerank import Rerank, not_a_variant

STREAMS = ("joined", "per_document")
DOC_SOURCES = ("auto", "dataset", "retrieve")
STRIP_PROMPT = ("tokens", "chars")
PROMPT_BOS = ("tokenizer", "model")  # or true / false
TRAIN_SOURCES = ("corpus", "dataset")


def _one_of(key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{key}={value!r}; use one of {choices}.")


@dataclass(frozen=True)
class RalmSettings:
    """`ralm.*`: language modelling with retrieval (paper §3-§6); see ralm/conf/ralm/base.yaml."""

    max_length: int = field(metadata=limits(min=2, positions="model"))  # the LM's window
    stride: int = field(metadata=limits(min=1))  # and <= max_length - 1 (checked with the model)
    retrieval_stride: int | None = field(metadata=limits(min=1))
    query_len: int = field(metadata=limits(min=1))
    query_clean_spaces: bool
    doc_max_tokens: int = field(metadata=limits(min=1))
    k: int = field(metadata=limits(min=1))
    rerank: Rerank           # the variant the config group ralm/rerank chose
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
        if not isinstance(self.rerank, Rerank):
            raise not_a_variant(self.rerank)
        _one_of("ralm.word_count", self.word_count, WORD_COUNT_RULES)
        _one_of("ralm.stream", self.stream, STREAMS)
        if isinstance(self.window_bos, str) and self.window_bos != "auto":
            raise ConfigError(f"ralm.window_bos={self.window_bos!r}; use auto, true or false.")

    def window_bos_for(self, model_adds_bos: bool) -> bool:
        """`auto`: a BOS over position 0 of document-less windows iff the model adds one."""
        return bool(model_adds_bos) if self.window_bos == "auto" else bool(self.window_bos)


@dataclass(frozen=True)
class RunSettings:
    """One language-modelling run's settings: the `ralm.*` node with what the run adds to it,
    resolved once (RunSettings.of). The evaluation loop, the document sources and the results
    row (`row`) read only this object."""

    ralm: RalmSettings
    rerank: Rerank                # the variant ralm/rerank chose (ralm.rerank)
    retrieval_stride: int         # ralm.retrieval_stride, null = the evaluation stride
    window_bos: bool              # ralm.window_bos, `auto` resolved against the model
    retrieval_file: str | None    # retrieval.from_file or ralm.retrieval_file
    seed: int
    batch_size: int

    def __post_init__(self) -> None:
        self.check()

    @classmethod
    def of(cls, ralm: RalmSettings, *, seed: int, batch_size: int, model_adds_bos: bool,
           from_file: str | None) -> RunSettings:
        """`from_file` is `retrieval.from_file`, the short form of ralm.retrieval_file."""
        own = ralm.retrieval_file
        if from_file and own and str(from_file) != str(own):
            raise ConfigError("retrieval.from_file and ralm.retrieval_file name different "
                              "files; set one.")
        every = ralm.retrieval_stride
        return cls(ralm=ralm, rerank=ralm.rerank,
                   retrieval_stride=int(every if every is not None else ralm.stride),
                   window_bos=ralm.window_bos_for(model_adds_bos),
                   retrieval_file=from_file or own, seed=int(seed), batch_size=int(batch_size))

    def check(self) -> None:
        """Settings that cannot work together (each alone passed its own check)."""
        r, v = self.ralm, self.rerank
        if r.k < 1:
            raise ConfigError(f"ralm.k={r.k} must be >= 1.")
        if v.retrieves and r.doc_max_tokens + r.stride + v.window_extra(r.rerank_tokens) \
                >= r.max_length:
            extra = f" + rerank_tokens ({r.rerank_tokens})" if v.ranks_prefix else ""
            raise ConfigError(
                f"ralm.doc_max_tokens ({r.doc_max_tokens}) + stride ({r.stride}){extra}"
                f" must be below ralm.max_length ({r.max_length}): the document would "
                f"overwrite scored tokens.")
        if self.retrieval_stride < r.stride:
            raise ConfigError(f"ralm.retrieval_stride={self.retrieval_stride} is below "
                              f"ralm.stride={r.stride}: every evaluation window already "
                              f"retrieves; set retrieval_stride >= stride.")

    def row(self, *, model_adds_bos: bool, scorer_name: str,
            corpus_name: str | None) -> dict[str, Any]:
        """Everything that changes the number, for the results row (column names and values
        as the committed rows have them). `scorer_name`: the zero-shot scoring LM (the
        evaluated one unless scorer=...)."""
        r, v = self.ralm, self.rerank
        return {
            "stride": r.stride, "retrieval_stride": self.retrieval_stride,
            "query_len": r.query_len, "query_clean_spaces": r.query_clean_spaces,
            "max_length": r.max_length, "doc_max_tokens": r.doc_max_tokens,
            **v.row(r.k, r.rerank_tokens, scorer_name),
            "word_count": r.word_count, "stream": r.stream, "add_bos": bool(model_adds_bos),
            "window_bos": self.window_bos, "retrieval_file": self.retrieval_file,
            "forbidden_titles": str(r.forbidden_titles),
            "corpus": corpus_name if v.searches and not self.retrieval_file else None,
        }


# The package's own conf folder (its profile's conf_dir): the option files live there.
CONF = Path(__file__).parent / "conf"
RERANK_GROUP = CONF / "ralm" / "rerank"


def rerank_option(name: str) -> Rerank:
    """The variant the option `ralm/rerank=<name>` selects, read from its config group file
    (ralm/conf/ralm/rerank/<name>.yaml), so scripts and tests choose variants as a run does."""
    path = RERANK_GROUP / f"{name}.yaml"
    if not path.is_file():
        options = sorted(p.stem for p in RERANK_GROUP.glob("*.yaml"))
        raise ConfigError(f"ralm/rerank={name!r} is not an option of ralm/conf/ralm/rerank/; use "
                          f"one of {options}.")
    found = instantiate(OmegaConf.load(path).rerank)
    assert isinstance(found, Rerank), path
    return found


def _default_rerank() -> str:
    """The ralm/rerank option ralm/conf/ralm/base.yaml's defaults list chooses."""
    for entry in OmegaConf.load(CONF / "ralm" / "base.yaml").defaults:
        if isinstance(entry, Mapping) and "/ralm/rerank" in entry:
            return str(entry["/ralm/rerank"])
    raise ConfigError("ralm/conf/ralm/base.yaml chooses no /ralm/rerank option.")


def settings_from_defaults(values: Mapping[str, Any], *, seed: int, batch_size: int,
                           model_adds_bos: bool) -> RunSettings:
    """RunSettings outside a composed config (tests, benchmarks, scripts): the `ralm` node of
    ralm/conf/ralm/base.yaml, where the defaults live, with `values` over it; `rerank` is an
    option name of ralm/conf/ralm/rerank/ (as on the command line) or a variant."""
    node = OmegaConf.to_container(OmegaConf.load(CONF / "ralm" / "base.yaml").ralm)
    assert isinstance(node, dict)
    node.pop("_target_", None)
    known = {f.name for f in fields(RalmSettings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{unknown} are not settings of RalmSettings; use {sorted(known)}.")
    rerank = values.get("rerank", _default_rerank())
    ralm = RalmSettings(**{**node, **values, "rerank": rerank_option(rerank)
                           if isinstance(rerank, str) else rerank})
    return RunSettings.of(ralm, seed=seed, batch_size=batch_size,
                          model_adds_bos=model_adds_bos, from_file=None)


@dataclass(frozen=True)
class QASettings:
    """`qa.*`: open-domain QA (paper §5, official eval_qa.py); see
    ralm/conf/experiment/ralm/table4."""

    num_docs: int = field(metadata=limits(min=0))  # documents in the prompt (0 = closed book)
    doc_source: str = field(metadata=limits(choices=DOC_SOURCES))  # dataset: the record's ctxs
    normalize_question: bool
    max_new_tokens: int = field(metadata=limits(min=1))
    context_margin: int = field(metadata=limits(min=0))  # prompt kept to context_size - margin tokens
    strip_prompt: str = field(metadata=limits(choices=STRIP_PROMPT))  # chars: official
    prompt_bos: str | bool = field(metadata=limits(choices=PROMPT_BOS))  # tokenizer: official
    batch_size: int = field(metadata=limits(min=1))  # official: 1; >1 batches with left padding

    def __post_init__(self) -> None:
        if self.num_docs < 0:
            raise ConfigError(f"qa.num_docs={self.num_docs} must be >= 0.")
        if self.batch_size < 1:
            raise ConfigError(f"qa.batch_size={self.batch_size} must be >= 1.")
        _one_of("qa.doc_source", self.doc_source, DOC_SOURCES)
        _one_of("qa.strip_prompt", self.strip_prompt, STRIP_PROMPT)
        _one_of("qa.prompt_bos", str(self.prompt_bos).lower(), (*PROMPT_BOS, "true", "false"))

    def row(self, *, doc_source: str, prompt_max_tokens: int,
            n_examples: int) -> dict[str, Any]:
        """The results row's QA settings (column names and values as the committed rows have
        them): what changes the numbers, with where the documents came from and the prompt
        budget (the model's context size minus qa.context_margin)."""
        return {"num_docs": self.num_docs, "doc_source": doc_source,
                "normalize_question": self.normalize_question,
                "max_new_tokens": self.max_new_tokens, "prompt_max_tokens": prompt_max_tokens,
                "strip_prompt": self.strip_prompt, "prompt_bos": self.prompt_bos,
                "qa_batch_size": self.batch_size, "decoding": "greedy",
                "n_examples": n_examples}


@dataclass(frozen=True)
class RerankerSettings:
    """`reranker.*`: the predictive reranker's training (paper §6.2); see ralm/conf/reranker/.
    Its encoder is a composed conf/encoder node; its labelling LM is the top-level
    `label_model` node (absent: the evaluated LM)."""

    encoder: dict[str, Any]
    arch: str
    max_length: int = field(metadata=limits(min=1, positions=".encoder"))  # encoder tokens
    prefix_tokens: int | None = field(metadata=limits(min=1))
    train_source: str = field(metadata=limits(choices=TRAIN_SOURCES))
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
        _one_of("reranker.train_source", self.train_source, TRAIN_SOURCES)
