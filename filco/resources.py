"""The typed objects one FilCo run is built from, each with one responsibility:

- `Setup`: what the run is (its settings, the task and measure they select, the base model
  every filter and generator is fine-tuned from, the seed);
- `Models`: fine-tunes models from the base (cached by content) and decodes with them (cached);
- `Budgets`: checks a generation budget against the longest target its model is trained on;
- `Labeller`: the silver contexts of a set of examples (cached by content);
- `Labelled`: the training and test examples with their silver contexts;
- `TestContexts`: what a variant (filco/variants.py) hands the generator at test time.

filco/variants.py operates on these; filco/pipeline.py builds them and runs a variant."""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from ragrepro.cache import cache_path, cached_json
from ragrepro.deferred import Deferred
from ragrepro.generation import check_budget, record
from ragrepro.hashing import hash_obj
from ragrepro.models.lm import LM

from .cxmi import CxmiScorer
from .encoding import prompt_ids_truncated, target_ids
from .measures import MeasureSpec
from .silver import Example, Silver, silver_contexts
from .split import split_sentences
from .tasks import Task, get_task
from .train import trained_lm

if TYPE_CHECKING:
    # annotations only: the settings hold a variant (filco/variants.py), and variants are
    # built on these objects, so the layering is resources -> variants -> settings
    from .settings import FilcoSettings

log = logging.getLogger(__name__)


def task_of(fc: FilcoSettings, dataset_task: str) -> Task:
    """filco.task, or (auto) the evaluation dataset's `task` (its conf/dataset YAML)."""
    return get_task(dataset_task if fc.task == "auto" else fc.task)


def measure_spec(fc: FilcoSettings, task: Task) -> MeasureSpec:
    """filco.measure (auto: the task's, paper §4.2) under filco.measure_mode and its overrides."""
    name = task.measure if fc.measure == "auto" else fc.measure
    return MeasureSpec.from_mode(name, fc.measure_mode, **fc.measure_overrides)


def cache_file(kind: str, key_obj: Any) -> Path:
    """The JSON cache file of one computation (silver contexts, generations) keyed by content."""
    return cache_path("filco", kind, f"{hash_obj(key_obj, 20)}.json")


def join_passages(passages: Sequence[str]) -> str:
    """Passages as one context (Full's, and Psg's kept ones): one per line."""
    return "\n".join(passages)


@dataclass(frozen=True)
class Setup:
    """What one run is: its settings, the task and the measure they select, the base model
    (the generator, and the base every filter and generator is fine-tuned from), the seed."""

    fc: FilcoSettings
    task: Task
    spec: MeasureSpec
    lm: LM
    seed: int

    @classmethod
    def of(cls, fc: FilcoSettings, dataset_task: str, lm: LM, seed: int) -> Setup:
        """The setup of a run on a dataset whose `task` is `dataset_task` (filco.task=auto)."""
        task = task_of(fc, dataset_task)
        return cls(fc, task, measure_spec(fc, task), lm, seed)

    def split(self, text: str) -> list[str]:
        """The sentences of `text` under filco.splitter."""
        return split_sentences(text, splitter=self.fc.splitter)


@dataclass(frozen=True)
class Models:
    """Fine-tunes filters and generators from the base model (filco/train.py caches them by
    base, settings and pairs) and generates with them (cached by model, inputs and budget)."""

    setup: Setup

    def fine_tune(self, role: str, pairs: Sequence[tuple[str, str]],
                  name: str | None = None) -> tuple[LM, dict[str, Any]]:
        """The model trained on `pairs` under filco.train.<role> (ctx, gen or psg); `name` is
        its cache folder's role name (the generators: gen-full, gen-psg, gen-silver)."""
        s = self.setup
        return trained_lm(s.lm, pairs, s.fc.train.config(role, s.seed), name or role)

    def generate_records(self, lm: LM, sources: Sequence[str], max_new: int,
                         what: str) -> list[dict[str, Any]]:
        """{text, generation} per source: the decoded output and its generation record (finish
        reason, prompt/output tokens, truncation; ragrepro.generation.record)."""
        fc = self.setup.fc
        # `records: 2`: the cache holds records, not the bare texts of earlier versions
        key = {"model": [lm.name, lm.revision], "sources": hash_obj(list(sources), 32),
               "max_new": max_new, "max_in": fc.max_input_tokens, "records": 2}

        def compute() -> list[dict[str, Any]]:
            out: list[dict[str, Any]] = []
            bs = fc.gen_batch_size
            for b in tqdm(range(0, len(sources), bs), desc=what, leave=False):
                enc = [prompt_ids_truncated(lm, s, fc.max_input_tokens) for s in sources[b:b + bs]]
                gen = lm.generate_with_finish([ids for ids, _ in enc], max_new_tokens=max_new,
                                              batch_size=bs)
                for (ids, cut), (new, finish) in zip(enc, gen):
                    text = lm.decode(new, skip_special_tokens=True).strip()
                    out.append({"text": text, "generation": record(
                        finish, len(ids), len(new), truncated=cut, prediction=text)})
            return out

        return cached_json(cache_file("generations", key), compute)

    def generate_texts(self, lm: LM, sources: Sequence[str], max_new: int,
                       what: str) -> list[str]:
        return [r["text"] for r in self.generate_records(lm, sources, max_new, what)]


# Each generation budget must hold the longest target its model is trained on, as it is
# trained on it: EOS included (a model that cannot emit its end token runs to the budget, and
# the row measures the harness), cut at the role's train max_target_tokens (a model never
# trained past that length cannot be cut off by a budget that reaches it; ELI5's long
# answers under the paper's 128). Checked before training; test generation uses the same.
@dataclass(frozen=True)
class Budgets:
    """Checks generation budgets (`filco.<x>_max_new_tokens`) against training targets.
    `uncapped`: the budgets the rehearsal capped, dotted key -> configured value
    (rehearsal.uncapped): under its cap a check still reads the budget a real run would use."""

    setup: Setup
    uncapped: Mapping[str, Any] | None = None

    def configured(self, key: str, value: int) -> int:
        """The budget `key` was configured with (the rehearsal's record of it, else `value`)."""
        return int(self.uncapped[key]) if self.uncapped and key in self.uncapped else int(value)

    def encoder(self, role: str) -> Callable[[str], list[int]]:
        """A target's tokens as filco.train.<role> trains on them (cut at max_target_tokens)."""
        s = self.setup
        cut = s.fc.train.config(role, s.seed).max_target_tokens
        return lambda text: target_ids(s.lm, text, cut)

    def check(self, key: str, value: int, role: str, targets: Sequence[str],
              what: str) -> dict[str, int]:
        """{key: tokens the longest target needs}; a ConfigError naming the fix when `value`
        (as configured) is too small."""
        return {key: check_budget(key, self.configured(key, value), targets,
                                  self.encoder(role), what)}


@dataclass(frozen=True)
class Labelled:
    """The training and test examples with their silver contexts (empty ones where the
    variant needs none: filco/variants.py `labels_train`, `labels_test`)."""

    train: Sequence[Example]
    test: Sequence[Example]
    sil_train: Sequence[Silver]
    sil_test: Sequence[Silver]


@dataclass(frozen=True)
class TestContexts:
    """Per test example: the variant's filtered context (before the test-time fallback),
    the context the generator reads, and the filter model's training info and generation
    records (FilCo)."""

    filtered: list[str]
    contexts: list[str]
    info: dict[str, Any] = field(default_factory=dict)
    filter_generation: list[dict[str, Any]] | None = None


def examples_key(exs: Sequence[Example]) -> str:
    return hash_obj([[e.qid, e.question, list(e.answers), list(e.passages), e.task] for e in exs], 32)


@dataclass(frozen=True)
class Labeller:
    """Silver contexts under the run's measure, cached by examples, measure, splitter and
    scorer. `cxmi_scorer`: CXMI's scoring model, built on first use (measure=cxmi only);
    none = the base model."""

    setup: Setup
    cxmi_scorer: Deferred = field(default_factory=Deferred)

    @cached_property
    def scorer_lm(self) -> LM:
        return self.cxmi_scorer.build() if self.cxmi_scorer else self.setup.lm

    def scorer(self) -> CxmiScorer | None:
        s = self.setup
        if s.spec.name != "cxmi":
            return None
        return CxmiScorer(self.scorer_lm, s.task, prompt=s.fc.cxmi.prompt,
                          batch_size=s.fc.cxmi.batch_size, max_input_tokens=s.fc.max_input_tokens)

    def silvers(self, exs: Sequence[Example]) -> list[Silver]:
        s, scorer = self.setup, self.scorer()
        key = {"examples": examples_key(exs), "spec": s.spec.as_dict(), "splitter": s.fc.splitter,
               "scorer": None if scorer is None else [scorer.lm.name, scorer.lm.revision,
                                                       scorer.prompt, scorer.max_input_tokens]}
        rows = cached_json(cache_file("silver", key), lambda: [
            x.__dict__ for x in silver_contexts(exs, s.spec, s.split, scorer)])
        return [Silver(**r) for r in rows]
