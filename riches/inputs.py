"""What every RICHES variant starts from: the LM, the questions still to answer (resume),
the corpus passages and the few-shot prompt chosen for the question set."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragrepro.data.records import Passage, QARecord
from ragrepro.errors import ConfigError
from ragrepro.models.lm import LM
from ragrepro.retrieval import Corpus
from ragrepro.tracking import Run

from .attribution import warn_if_missing
from .settings import RichesSettings

# the shipped few-shot prompts (riches/conf/riches/prompts)
QA_PROMPTS = ("single_hop", "multi_hop")


@dataclass(frozen=True)
class Inputs:
    lm: LM
    records: list[QARecord]
    todo: list[QARecord]          # records without a finished sample in the run
    docs: list[Passage]
    corpus_text: dict[str, str]   # title -> text of its first passage (demonstrations)
    prompt: Mapping[str, Any]


def prompt_name(choice: str, prompts: Mapping[str, Any], records: Sequence[QARecord]) -> str:
    """`auto`: the multi-hop prompt when any question has more than one hop."""
    if choice == "auto":
        return "multi_hop" if any(r.hops > 1 for r in records) else "single_hop"
    if choice not in prompts or choice == "propositions":
        names = [n for n in prompts if n != "propositions"]
        raise ConfigError(
            f"riches.prompt={choice!r}; choose auto or one of {names}. Your own prompt: put "
            f"<name>.yaml under riches/conf/riches/prompts/ (or a hydra.searchpath folder) and run "
            f"with +riches/prompts@riches.prompts.<name>=<name> riches.prompt=<name>.")
    return choice


def prepare(run: Run, lm: LM, records: Sequence[QARecord], corpus: Corpus,
            settings: RichesSettings) -> Inputs:
    warn_if_missing(settings.autoais, run.experiment)
    records = list(records)
    done = {r["qid"] for r in run.repair_samples()}
    docs = list(corpus.passages)
    corpus_text: dict[str, str] = {}
    for p in docs:
        corpus_text.setdefault(p.title, p.text)
    prompt = settings.prompts[prompt_name(settings.prompt, settings.prompts, records)]
    return Inputs(lm, records, [r for r in records if r.qid not in done], docs, corpus_text,
                  prompt)
