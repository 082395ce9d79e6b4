"""A fourth method that lives only in a temporary folder, as a plug-in author writes it from
docs/extending.md: its package, its conf folder and its registration (a `*.dist-info` with
`entry_points.txt`, what `pip install` leaves) on PYTHONPATH, and no edit to this repository.

The toy is open-book QA: BM25 (the core's retriever) over a corpus of its own, five
hand-written passages, gives each question its top passage; a model (smollm2-135m at mini
scale, GPT-2 at paper scale, a stand-in in the rehearsal) answers from it. It records
generation diagnostics (flags), a metric of its own (`passage_has_answer`, described in its
profile), a config group of its own (`toy/prompt`), a mini and a paper config and one table
spec with both parts. Shared by tests/core/test_method_plugin.py and
tests/core/test_plugin_papercuts.py.

On vital-qa's first six test questions the top passage holds the gold answer for exactly the
first three (Constantine, Caelifera, Apis); no passage contains Jerusalem, The Jewish War or
800, so `passage_has_answer` is 3/6 whatever the model writes."""
from __future__ import annotations

import csv
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ragrepro.paths import REPO_ROOT

TOY_PIPELINE = '''
    """A toy open-book QA method: the top passage of a retriever, then the model's answer."""
    from __future__ import annotations

    from collections.abc import Callable, Sequence
    from dataclasses import dataclass

    from ragrepro.data.records import QARecord
    from ragrepro.generation import record, summarize
    from ragrepro.metrics import get_metric
    from ragrepro.models.lm import LM
    from ragrepro.pipeline import Result
    from ragrepro.retrieval.base import Retriever
    from ragrepro.retrieval.corpus import Corpus
    from ragrepro.tracking import Run


    @dataclass(frozen=True)
    class ToySettings:
        prompt: str
        prompt_name: str
        max_new_tokens: int
        train_steps: int


    def first_line(text: str) -> str:
        return text.strip().split("\\n")[0].strip()


    def run(run: Run, *, lm: LM, records: Sequence[QARecord], corpus: Corpus,
            retriever: Callable[..., Retriever], settings: ToySettings) -> Result:
        built = retriever(corpus=corpus)            # the core's BM25 over the run's corpus
        hits = built.search([r.question for r in records], k=1)
        passages = [h[0].as_text() if h else "" for h in hits]
        prompts = [lm.encode(settings.prompt.format(passage=p, question=r.question))
                   for p, r in zip(passages, records)]
        outputs = lm.generate_with_finish(prompts, max_new_tokens=settings.max_new_tokens,
                                          batch_size=1)
        em, has = get_metric("em_squad"), get_metric("has_answer")
        samples = []
        for i, (rec, passage, ids, (new, finish)) in enumerate(
                zip(records, passages, prompts, outputs)):
            answer = first_line(lm.decode(new, skip_special_tokens=True))
            samples.append({
                "idx": i, "qid": rec.qid, "passage": passage, "prediction": answer,
                "em_squad": em.fn(answer, list(rec.answers)),
                "passage_has_answer": has.fn(passage, list(rec.answers)),
                # one record per generation stage: the row's gen_answer_* rates and flags
                "generation": {"answer": record(finish, len(ids), len(new),
                                                prediction=answer)},
                "diag": {"passage_found": bool(passage)}})
            run.add_sample(samples[-1])
        metrics = {m: sum(s[m] for s in samples) / len(samples)
                   for m in ("em_squad", "passage_has_answer")}
        return Result(metrics={**metrics, **summarize(samples)},
                      settings={"toy_prompt": settings.prompt_name,
                                "toy_max_new_tokens": settings.max_new_tokens,
                                "toy_train_steps": settings.train_steps,
                                "retriever": built.name, "corpus": corpus.name})
'''
TOY_CORPUS = '''
    """The toy's own corpus: five passages, three of which answer vital-qa questions."""
    from ragrepro.data.records import Passage
    from ragrepro.retrieval.corpus import Corpus, corpus_from_passages

    FACTS = (
        ("St. Peter's Basilica", "Old St. Peter's Basilica in Rome was built by the Roman "
                                 "emperor Constantine in the fourth century."),
        ("Grasshopper", "Grasshoppers are insects of the suborder Caelifera."),
        ("Western honey bee", "The western honey bee belongs to the genus Apis."),
        ("Mount Everest", "Mount Everest is the highest mountain above sea level."),
        ("Volcano", "A volcano is a rupture in the crust of a planet."),
    )


    def toy_facts(*, name: str) -> Corpus:
        return corpus_from_passages(name, [Passage(pid=f"toy-{i}", title=t, text=x)
                                           for i, (t, x) in enumerate(FACTS)])
'''
TOY_PROFILE = '''
    from pathlib import Path

    from omegaconf import OmegaConf

    from ragrepro.methods import MethodProfile, PlanExtras, PlannerHooks, RehearsalHooks, Sizing
    from ragrepro.metrics.registry import Metric


    def plan(cfg, tflops):
        n = int(OmegaConf.select(cfg, "limit") or 1000)
        new = int(OmegaConf.select(cfg, "toy.max_new_tokens"))
        return PlanExtras(files=[("toy lexicon", "/nonexistent/toy-lexicon.tsv", False)],
                          sizing=Sizing(n * (100 + new), 512, 1))


    def training_caps(cfg, budget):
        # called for every rehearsed cell, the other methods' too: only a toy cell has steps
        steps = OmegaConf.select(cfg, "toy.train_steps", default=None)
        return {} if steps is None else {"toy.train_steps": min(int(steps), budget.steps)}


    def coverage(cfg, metrics):
        if metrics and metrics.get("diag_passage_found") == 0:
            return "no question retrieved a passage: the reader never read one"
        return ""


    PROFILE = MethodProfile(
        name="toy", packages=("toymethod",), config_nodes=("toy",),
        conf_dir=Path(__file__).resolve().parent.parent / "toyconf",
        config_groups=("toy/prompt",),
        metrics=(Metric("passage_has_answer", "gold answer in the top passage (%)",
                        scale=100, unit="%"),),
        planner=PlannerHooks(plan=plan, untimed_training="toy reader"),
        rehearsal=RehearsalHooks(generation_keys=("toy.max_new_tokens",),
                                 training_caps=training_caps, coverage=coverage))
'''
TOY_PIPELINE_NODE = '''
    retriever:
      _partial_: true          # built by the pipeline over `corpus`
      threads: 1
    pipeline:
      _target_: toymethod.pipeline.run
      _partial_: true
      lm: ${model}
      records: ${dataset}
      corpus: ${corpus}
      retriever: ${retriever}
      settings: ${toy}
'''
TOY_EXPERIMENT = '''
    # @package _global_
    defaults:
      - /toy: base
      - /toy/prompt: plain
      - override /model: smollm2-135m
      - override /dataset: vital-qa
      - override /corpus: toy-facts
      - override /retriever: bm25
      - _self_
    name: toy/main
    method: toy
    scale: mini
    limit: 6
''' + TOY_PIPELINE_NODE
TOY_PAPER_EXPERIMENT = '''
    # @package _global_
    defaults:
      - /toy: base
      - /toy/prompt: plain
      - override /model: gpt2
      - override /dataset: vital-qa
      - override /corpus: toy-facts
      - override /retriever: bm25
      - _self_
    name: toy/paper/main
    method: toy
    scale: paper
    limit: 6
    toy:
      max_new_tokens: 32
    hydra:
      sweeper:
        params:
          toy/prompt: plain,terse
''' + TOY_PIPELINE_NODE
TOY_SETTINGS = '''
    _target_: toymethod.pipeline.ToySettings
    prompt: ???
    prompt_name: ???
    max_new_tokens: 24
    train_steps: 100
'''
TOY_PROMPTS = {
    "plain": '''
        # @package toy
        prompt_name: plain
        prompt: "{passage}\\n\\nQuestion: {question}\\nAnswer:"
    ''',
    "terse": '''
        # @package toy
        prompt_name: terse
        prompt: "{passage}\\nQ: {question}\\nA:"
    ''',
}
TOY_CORPUS_YAML = '''
    _target_: toymethod.corpus.toy_facts
    name: toy-facts
'''
TOY_TABLE = '''
    paper: toy
    title: "Toy: our runs"
    experiments: [toy/main, toy/paper/main]
    keys:
      model: {column: model}
    metric: {columns: [passage_has_answer]}
    show: [model, dataset, limit, toy_prompt]
    results:
      layout: runs
      title: "Toy results ({table})"
      by: [toy_prompt]
      metrics: [passage_has_answer, em_squad]
      ci_metrics: [passage_has_answer, em_squad]
      context: [model, dataset, limit]
'''


def write_toy(root: Path) -> None:
    """The toy's package, its conf folder and its registration, as a separate install would
    leave them: <root>/toymethod/, <root>/toyconf/, <root>/toymethod-0.1.dist-info/."""
    files = {
        "toymethod/__init__.py": "",
        "toymethod/pipeline.py": TOY_PIPELINE,
        "toymethod/corpus.py": TOY_CORPUS,
        "toymethod/profile.py": TOY_PROFILE,
        "toyconf/experiment/toy/main.yaml": TOY_EXPERIMENT,
        "toyconf/experiment/toy/paper/main.yaml": TOY_PAPER_EXPERIMENT,
        "toyconf/toy/base.yaml": TOY_SETTINGS,
        **{f"toyconf/toy/prompt/{k}.yaml": v for k, v in TOY_PROMPTS.items()},
        "toyconf/corpus/toy-facts.yaml": TOY_CORPUS_YAML,
        "toyconf/report/tables/toy/main.yaml": TOY_TABLE,
        "toymethod-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: toymethod\n"
                                            "Version: 0.1\n",
        "toymethod-0.1.dist-info/entry_points.txt": "[ragrepro.methods]\n"
                                                    "toy = toymethod.profile:PROFILE\n",
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def toy_env(root: Path) -> dict[str, str]:
    """A process environment that sees the toy only through PYTHONPATH, with its results in
    <root>/results (never the repository's)."""
    path = os.pathsep.join(p for p in (str(root), str(REPO_ROOT),
                                       os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, "RAGREPRO_RESULTS": str(root / "results"),
            "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1"}


def python(root: Path, *args: str, ok: bool = True,
           cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a fresh process with the toy installed; ok: exit 0 asserted."""
    done = subprocess.run([sys.executable, *args], cwd=cwd or root, env=toy_env(root),
                          capture_output=True, text=True, timeout=900, check=False)
    if ok:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def ragrepro(root: Path, *args: str) -> str:
    """`ragrepro ARGS` in a fresh process that sees the toy only through PYTHONPATH."""
    return python(root, "-m", "ragrepro", *args).stdout


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))
