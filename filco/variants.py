"""FilCo's four settings (paper §4-5) as typed components: Full, Psg, FilCo, Silver.

Hydra builds one from the `filco/variant` config group (filco/conf/filco/variant/<name>.yaml sets
`filco.setting: {_target_: filco.variants.<Class>}`; filco/conf/filco/default.yaml chooses `filco`).
Each class says what the pipeline (filco/pipeline.py) asks of a setting: which silver contexts
it needs, which contexts its generator M_gen is trained on, which filter model it trains
(M_psg, M_ctx) and how it builds the context the generator reads at test time, which
fallbacks apply where, and its row names (`setting`, `method`). Nothing outside this module
compares a setting's name; a new setting is a new class and a new file in that group."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar

from . import prompts
from .resources import Budgets, Labelled, Models, Setup, TestContexts, join_passages
from .silver import Example, ctx_train_target, eval_context, gen_train_context, psg_labels
from .silver import Silver as SilverContext


class Variant(ABC):
    """One FilCo setting. Stateless: the run's settings and models come in as arguments."""

    name: ClassVar[str]            # the row's `setting` (and its filco/conf/filco/variant file)
    method: ClassVar[str]          # the row's `method`: the baselines are named apart from FilCo
    generator_role: ClassVar[str]  # the cache name of its M_gen (FilCo and Silver share one)
    labels_train: ClassVar[bool] = True  # needs the training set's silver contexts
    labels_test: ClassVar[bool] = False  # needs the test set's silver contexts

    @abstractmethod
    def train_contexts(self, train: Sequence[Example], sil: Sequence[SilverContext],
                       rule: str) -> list[str]:
        """M_gen's training context per training example; `rule` is fallback.gen_train."""

    def filter_budgets(self, budgets: Budgets, data: Labelled) -> dict[str, int]:
        """The budgets of its filter model, checked before it is trained (none by default)."""
        return {}

    @abstractmethod
    def test_contexts(self, models: Models, data: Labelled) -> TestContexts:
        """The context each test example's generator reads, and what produced it."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self)

    def __hash__(self) -> int:
        return hash(type(self))


def _with_test_fallback(models: Models, filtered: list[str], test: Sequence[Example],
                        **kw) -> TestContexts:
    """fallback.test applied to each filtered context (none, the code's: an empty one stays)."""
    rule = models.setup.fc.fallback.test
    return TestContexts(filtered, [eval_context(f, e.passages, rule)
                                   for f, e in zip(filtered, test)], **kw)


class Full(Variant):
    """Full: the generator reads the top-k passages as retrieved, in training and at test."""

    name, method, generator_role = "full", "filco-full", "gen-full"
    labels_train = False

    def train_contexts(self, train: Sequence[Example], sil: Sequence[SilverContext],
                       rule: str) -> list[str]:
        return [join_passages(e.passages) for e in train]

    def test_contexts(self, models: Models, data: Labelled) -> TestContexts:
        full = [join_passages(e.passages) for e in data.test]
        return TestContexts(full, list(full))


class Psg(Variant):
    """Psg: the passages the measure drew a silver span from; at test time a passage filter
    (M_psg, yes/no per passage) trained on those labels decides."""

    name, method, generator_role = "psg", "filco-psg", "gen-psg"

    def train_contexts(self, train: Sequence[Example], sil: Sequence[SilverContext],
                       rule: str) -> list[str]:
        return [join_passages([p for p, keep in zip(e.passages, psg_labels(s, len(e.passages)))
                               if keep]) or gen_train_context(SilverContext(""), e.passages, rule)
                for e, s in zip(train, sil)]

    @staticmethod
    def filter_pairs(setup: Setup, train: Sequence[Example],
                     sil: Sequence[SilverContext]) -> list[tuple[str, str]]:
        """M_psg training pairs: question + one passage -> yes / no (its silver label)."""
        task = setup.task
        return [(prompts.psg_prompt(task, e.question, p), prompts.PSG_YES if keep else prompts.PSG_NO)
                for e, s in zip(train, sil)
                for p, keep in zip(e.passages, psg_labels(s, len(e.passages)))]

    def test_contexts(self, models: Models, data: Labelled) -> TestContexts:
        task = models.setup.task
        pairs = self.filter_pairs(models.setup, data.train, data.sil_train)
        model, info = models.fine_tune("psg", pairs)
        sources = [prompts.psg_prompt(task, e.question, p) for e in data.test for p in e.passages]
        verdicts = iter(models.generate_texts(model, sources, 2, "psg filter"))
        kept = [join_passages([p for p in e.passages
                               if next(verdicts).lower().startswith(prompts.PSG_YES)])
                for e in data.test]
        return _with_test_fallback(models, kept, data.test, info=info)


class _SilverTrained(Variant):
    """FilCo and Silver share one generator, trained on the silver sentences (fallback.gen_train
    when none passed)."""

    generator_role = "gen-silver"
    labels_test = True  # Silver reads them; for FilCo they are a diagnostic (ctx_is_silver)

    def train_contexts(self, train: Sequence[Example], sil: Sequence[SilverContext],
                       rule: str) -> list[str]:
        return [gen_train_context(s, e.passages, rule) for e, s in zip(train, sil)]


class FilCo(_SilverTrained):
    """FilCo: a context filter M_ctx (question + passages -> the silver sentences) writes the
    generator's context at test time. Its test set's silver contexts are a diagnostic
    (ctx_is_silver); filco.test_context=silver_as_released feeds them instead, as the
    released replace_context.py does (issue #10)."""

    name, method = "filco", "filco"

    @staticmethod
    def predicts(setup: Setup) -> bool:
        """Whether the filter's predictions are fed (the paper), not the silver contexts."""
        return setup.fc.test_context == "predicted"

    @staticmethod
    def ctx_pairs(s: Setup, train: Sequence[Example],
                  sil: Sequence[SilverContext]) -> list[tuple[str, str]]:
        """M_ctx training pairs: question + passages -> the silver context (fallback.ctx_target
        says what an empty one becomes; `drop` leaves the example out)."""
        rule = s.fc.fallback.ctx_target
        return [(prompts.ctx_prompt(s.task, e.question, e.passages, s.fc.ctx_answer_prefix),
                 ctx_train_target(x, rule, e.passages))
                for e, x in zip(train, sil) if x.text or rule != "drop"]

    def filter_budgets(self, budgets: Budgets, data: Labelled) -> dict[str, int]:
        """M_ctx's targets are the silver contexts: known once the training set is labelled."""
        if not self.predicts(budgets.setup):
            return {}
        targets = [t for _, t in self.ctx_pairs(budgets.setup, data.train, data.sil_train)]
        return budgets.check("filco.ctx_max_new_tokens", budgets.setup.fc.ctx_max_new_tokens,
                             "ctx", targets, "M_ctx training target (silver context)")

    def test_contexts(self, models: Models, data: Labelled) -> TestContexts:
        s = models.setup
        if not self.predicts(s):
            # silver_as_released: the released replace_context.py feeds the silver context
            # copied by query.py instead of the filter's predictions (issue #10)
            return _with_test_fallback(models, [x.text for x in data.sil_test], data.test)
        model, info = models.fine_tune("ctx", self.ctx_pairs(s, data.train, data.sil_train))
        sources = [prompts.ctx_prompt(s.task, e.question, e.passages, s.fc.ctx_answer_prefix)
                   for e in data.test]
        recs = models.generate_records(model, sources, s.fc.ctx_max_new_tokens, "M_ctx")
        return _with_test_fallback(models, [r["text"] for r in recs], data.test, info=info,
                                   filter_generation=[r["generation"] for r in recs])


class Silver(_SilverTrained):
    """Silver (oracle): the generator reads the test example's own silver context."""

    name, method = "silver", "filco-silver"

    def test_contexts(self, models: Models, data: Labelled) -> TestContexts:
        return _with_test_fallback(models, [x.text for x in data.sil_test], data.test)
