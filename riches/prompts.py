"""Few-shot prompts assembled as token ids. The prompts themselves are config: Hydra composes
riches/conf/riches/prompts/*.yaml into `riches.prompts` (riches/conf/riches/base.yaml), and the
pipeline hands them here as mappings.

A RICHES prompt is built segment by segment: free text is tokenised on its own, markers are
their fixed token ids and keys are tokenised exactly as the index stores them (" " + key). So
the demonstrations show the model the very token sequences the constraint allows it to emit,
whatever a tokenizer would merge at the "<<" boundary in running text.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ragrepro.errors import ConfigError

from .keys import split_sentences


def example_key(step: Mapping[str, Any], key_type: str, corpus_text: Mapping[str, str],
                title_sep: str = " | ", demo: str = "unit") -> str:
    """The demonstration key of one step for a key type, taken from the corpus where the key
    type is a corpus unit (so it is verbatim by construction). demo: 'unit' shows the whole
    unit; for sub-string keys 'sentence' shows the step's sentence (a paragraph sub-string)
    and 'first_sentence' shows "Title | first sentence" (a title_paragraph prefix)."""
    title = step["title"]
    if key_type in ("title_paragraph", "paragraph", "sentence") and title not in corpus_text:
        raise ConfigError(f"prompt example title {title!r} is not a corpus article; few-shot "
                          f"keys must come from the corpus.")
    if demo not in ("unit", "sentence", "first_sentence"):
        raise ConfigError(f"riches.key.demo={demo!r}; use unit, sentence or first_sentence.")
    if key_type == "title":
        return title
    if key_type == "title_paragraph":
        if demo == "first_sentence":
            return f"{title}{title_sep}{split_sentences(corpus_text[title])[0]}"
        return f"{title}{title_sep}{corpus_text[title]}"
    if key_type == "paragraph" and demo != "sentence":
        return corpus_text[title]
    if key_type in ("sentence", "paragraph"):
        sent = step["sentence"]
        if sent not in split_sentences(corpus_text[title]):
            raise ConfigError(f"prompt sentence {sent!r} is not a sentence of {title!r} in the "
                              f"corpus; copy it verbatim.")
        return sent
    if key_type == "proposition":
        return step["proposition"]
    raise ConfigError(f"unknown key type {key_type!r}")


def example_propositions(cfg: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(proposition, title) of every demonstration step: added to a mini-scale index."""
    return [(s["proposition"], s["title"]) for ex in cfg["examples"] for s in ex["steps"]
            if s.get("proposition")]


@dataclass
class RichesPrompt:
    """Token-level RICHES prompt. `encode(text)` tokenises free text without BOS;
    `key_ids(text)` is the index's key tokenisation; `bos` is prepended when not None."""

    cfg: Mapping[str, Any]
    key_type: str
    thoughts: bool
    encode: Callable[[str], list[int]]
    key_ids: Callable[[str], list[int]]
    open_ids: Sequence[int]
    close_ids: Sequence[int]
    corpus_text: Mapping[str, str]
    bos: int | None = None
    title_sep: str = " | "
    demo: str = "unit"

    def demo_keys(self) -> list[str]:
        return [example_key(s, self.key_type, self.corpus_text, self.title_sep, self.demo)
                for ex in self.cfg["examples"] for s in ex["steps"]]

    def _steps(self, steps: Sequence[Mapping[str, Any]]) -> list[int]:
        c = self.cfg
        ids: list[int] = []
        for s in steps:
            if self.thoughts:
                ids += self.encode(c["thought"].format(thought=s["thought"]))
            ids += self.encode(c["evidence"]) + list(self.open_ids)
            ids += self.key_ids(example_key(s, self.key_type, self.corpus_text, self.title_sep,
                                            self.demo))
            ids += list(self.close_ids) + self.encode(c["after_evidence"])
        return ids

    def demo_outputs(self) -> list[list[int]]:
        """What each demonstration shows the model writing after its question (keywords,
        keys, answer), as the prompt's own token ids: the least a generation budget must
        hold (riches/budgets.py)."""
        c = self.cfg
        return [self._steps(ex["steps"]) + self.encode(c["answer"].format(answer=ex["answer"]))
                for ex in c["examples"]]

    def prefix(self) -> list[int]:
        """Instruction and demonstrations: identical for every question (its KV is reused)."""
        c = self.cfg
        ids = [self.bos] if self.bos is not None else []
        ids += self.encode(c["instruction"].strip() + "\n\n")
        for ex in c["examples"]:
            ids += self.encode(c["question"].format(question=ex["question"]))
            ids += self._steps(ex["steps"])
            ids += self.encode(c["answer"].format(answer=ex["answer"]))
        return ids

    def build(self, question: str) -> tuple[list[int], int]:
        """(prompt ids, length of the shared prefix)."""
        head = self.prefix()
        return head + self.encode(self.cfg["question"].format(question=question)), len(head)


def parse_answer(text: str, answer_prefix: str = "Answer:") -> str:
    """The text after the last answer prefix, up to the end of its line."""
    i = text.rfind(answer_prefix)
    if i < 0:
        return ""
    return text[i + len(answer_prefix):].split("\n")[0].strip()


# -- baselines ---------------------------------------------------------------------------
def reader_prompt(cfg: Mapping[str, Any], corpus_text: Mapping[str, str], passages: Sequence[tuple[str, str]],
                  question: str) -> str:
    """Few-shot reader for the dense-retriever baseline: demonstrations use the gold
    article of each single-hop example; `passages` are (title, text) of the retrieved ones."""
    parts = [cfg["reader_instruction"].strip(), ""]
    for ex in cfg["examples"]:
        ctx = "".join(f"Passage: {s['title']}. {corpus_text[s['title']]}\n" for s in ex["steps"])
        parts.append(f"{ctx}Question: {ex['question']}\nAnswer: {ex['answer']}\n")
    ctx = "".join(f"Passage: {t}. {x}\n" for t, x in passages)
    parts.append(f"{ctx}Question: {question}\nAnswer:")
    return "\n".join(parts)


def iterative_demo(cfg: Mapping[str, Any], corpus_text: Mapping[str, str]) -> str:
    """Self-ask style decomposition demos: Follow-up -> Evidence (retrieved passage) -> Answer."""
    parts = [cfg["iterative_instruction"].strip(), ""]
    for ex in cfg["examples"]:
        lines = [f"Question: {ex['question']}"]
        for s in ex["steps"]:
            lines.append(f"Follow-up: {s['subquestion']}")
            lines.append(f"Evidence: {s['title']}. {corpus_text[s['title']]}")
        lines.append(f"Answer: {ex['answer']}")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)
