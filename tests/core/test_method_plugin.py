"""The plug-in seam (ragrepro/methods.py, docs/extending.md "A method"): a fourth method that
lives only in a temporary folder, its own package and conf folder registered through a
`*.dist-info/entry_points.txt` on PYTHONPATH, runs, plans, rehearses and appears in a results
table with intervals, with zero edits to the core; and the core names no method's keys."""
from __future__ import annotations

import ast
import csv
import inspect
import os
import re
import subprocess
import sys
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import riches.profile
from ragrepro.errors import ConfigError
from ragrepro.methods import MethodProfile, profiles_from, registered
from ragrepro.metrics import registry
from ragrepro.paths import REPO_ROOT

CORE = REPO_ROOT / "ragrepro"
# Core files that still name a method, each with why: none since issue 23 (the code id's
# paths, the rehearsal's fixtures and the plots' split settings come from the profiles).
KNOWN: dict[str, str] = {}

TOY_PIPELINE = '''
    """A toy method: answers every other question with its first gold answer."""
    from __future__ import annotations

    from collections.abc import Sequence
    from dataclasses import dataclass

    from ragrepro.data.records import QARecord
    from ragrepro.metrics import get_metric
    from ragrepro.pipeline import Result
    from ragrepro.tracking import Run


    @dataclass(frozen=True)
    class ToySettings:
        guess: str
        max_new_tokens: int
        train_steps: int


    def run(run: Run, *, records: Sequence[QARecord], settings: ToySettings) -> Result:
        em = get_metric("em_squad")
        rows = []
        for i, rec in enumerate(records):
            answer = rec.answers[0] if i % 2 == 0 else settings.guess
            rows.append({"idx": i, "prediction": answer,
                         "em_squad": em.fn(answer, list(rec.answers))})
            run.add_sample(rows[-1])
        return Result(metrics={"em_squad": em.aggregate([r["em_squad"] for r in rows])},
                      settings={"toy_guess": settings.guess,
                                "toy_max_new_tokens": settings.max_new_tokens,
                                "toy_train_steps": settings.train_steps})
'''
TOY_PROFILE = '''
    from pathlib import Path

    from omegaconf import OmegaConf

    from ragrepro.methods import MethodProfile, PlanExtras, Sizing


    def plan(cfg, tflops):
        n = int(OmegaConf.select(cfg, "limit"))
        new = int(OmegaConf.select(cfg, "toy.max_new_tokens"))
        return PlanExtras(files=[("toy lexicon", "/nonexistent/toy-lexicon.tsv", False)],
                          sizing=Sizing(n * (100 + new), 512, 1))


    def training_caps(cfg, budget):
        return {"toy.train_steps": min(int(OmegaConf.select(cfg, "toy.train_steps")),
                                       budget.steps)}


    PROFILE = MethodProfile(
        name="toy", packages=("toymethod",), config_nodes=("toy",),
        conf_dir=Path(__file__).resolve().parent.parent / "toyconf",
        generation_keys=("toy.max_new_tokens",), plan=plan, training_caps=training_caps)
'''
TOY_EXPERIMENT = '''
    # @package _global_
    defaults:
      - /toy: base
      - override /dataset: vital-qa
      - _self_
    name: toy/main
    method: toy
    limit: 6
    pipeline:
      _target_: toymethod.pipeline.run
      _partial_: true
      records: ${dataset}
      settings: ${toy}
'''
TOY_SETTINGS = '''
    _target_: toymethod.pipeline.ToySettings
    guess: "not an answer"
    max_new_tokens: 48
    train_steps: 100
'''
TOY_TABLE = '''
    paper: toy
    title: "Toy: our runs"
    experiments: [toy/main]
    keys:
      model: {column: model}
    metric: {columns: [em_squad]}
    show: [model, dataset, limit, toy_guess]
'''


def write_toy(root: Path) -> None:
    """The toy's package, its conf folder and its registration, as a separate install would
    leave them: <root>/toymethod/, <root>/toyconf/, <root>/toymethod-0.1.dist-info/."""
    files = {
        "toymethod/__init__.py": "",
        "toymethod/pipeline.py": TOY_PIPELINE,
        "toymethod/profile.py": TOY_PROFILE,
        "toyconf/experiment/toy/main.yaml": TOY_EXPERIMENT,
        "toyconf/toy/base.yaml": TOY_SETTINGS,
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


def ragrepro(root: Path, *args: str) -> str:
    """`ragrepro ARGS` in a fresh process that sees the toy only through PYTHONPATH."""
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "RAGREPRO_RESULTS": str(root / "results"),
           "OMP_NUM_THREADS": "1", "WANDB_MODE": "disabled"}
    done = subprocess.run([sys.executable, "-m", "ragrepro", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def test_a_fourth_method_in_a_temporary_folder_runs_plans_rehearses_and_tabulates(tmp_path):
    write_toy(tmp_path)
    ragrepro(tmp_path, "experiment=toy/main", "wandb.mode=disabled")
    (run,) = rows(tmp_path / "results" / "toy" / "main.csv")
    # 6 questions, the even three answered with their gold answer: EM = 3/6
    assert float(run["em_squad"]) == pytest.approx(0.5)
    assert (run["method"], run["limit"], run["toy_max_new_tokens"]) == ("toy", "6", "48")

    plan = ragrepro(tmp_path, "plan", "experiment=toy/main", "--gpu-mem", "80", "--gpus", "1")
    (cell,) = [r for r in plan.splitlines() if r.startswith("| (default) |")]
    assert cell.split(" | ")[-2] == f"{6 * (100 + 48):,}"  # the toy profile's sizing
    assert "toy lexicon /nonexistent/toy-lexicon.tsv (MISSING)" in plan

    ragrepro(tmp_path, "experiment=toy/main", "rehearsal=cpu", "wandb.mode=disabled",
             f"rehearsal.fixtures={tmp_path / 'fixtures'}")
    (rehearsed,) = rows(tmp_path / "results" / "rehearsal" / "toy" / "main.csv")
    # the rehearsal capped the toy's own keys: generation at 16 tokens, training at 2 steps
    assert (rehearsed["toy_max_new_tokens"], rehearsed["toy_train_steps"]) == ("16", "2")
    assert rehearsed["limit"] == "2"

    table = ragrepro(tmp_path, "table", "toy/main")  # its spec is in the toy's conf folder
    (line,) = [r for r in table.splitlines() if "| vital-qa | 6 | not an answer |" in r]
    # EM 50 (x100) over 6 questions with its bootstrap interval: every resampled mean is k/6
    found = re.search(r"\| (\d+\.\d+) \[(\d+\.\d+), (\d+\.\d+)\] \| 6 \|", line)
    assert found, line
    ours, low, high = (float(x) for x in found.groups())
    assert ours == 50.0 and 0 <= low < ours < high <= 100
    assert all(abs(b * 6 / 100 - round(b * 6 / 100)) < 1e-3 for b in (low, high))


def test_registry_refuses_what_is_not_a_profile():
    def entry(name: str, value: str) -> EntryPoint:
        return EntryPoint(name, value, "ragrepro.methods")

    (ralm,) = profiles_from([entry("ralm", "ralm.profile:PROFILE")])
    assert ralm.name == "ralm" and ralm.packages == ("ralm",)
    with pytest.raises(ConfigError, match="not a ragrepro.methods.MethodProfile"):
        profiles_from([entry("x", "ralm.profile:sizing")])
    with pytest.raises(ConfigError, match="give the entry point the profile's name"):
        profiles_from([entry("x", "ralm.profile:PROFILE")])
    # the three shipped methods, sorted by name (the order every loop of the core follows)
    assert [p.name for p in registered()] == ["filco", "ralm", "riches"]


def core_hits(profiles: tuple[MethodProfile, ...]) -> dict[str, list[str]]:
    """{core file: hits} of the profiles' names in code (docstrings and comments are prose):
    an import of a method package, a string that is a package name or config group, or one
    that reads a method's config node (`ralm.stride`, `toy.max_new_tokens`)."""
    exact = {n for p in profiles for n in (*p.packages, *p.config_groups)}
    nodes = {n for p in profiles for n in p.config_nodes}
    alternatives = "|".join(map(re.escape, sorted(nodes)))
    dotted = re.compile(rf"(?<![\w/.-])({alternatives})\.\w")
    out: dict[str, list[str]] = {}
    for path in sorted(CORE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        prose = {id(n.body[0].value) for n in ast.walk(tree)
                 if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                   ast.AsyncFunctionDef))
                 and n.body and isinstance(n.body[0], ast.Expr)
                 and isinstance(n.body[0].value, ast.Constant)}
        hits = []
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in prose:
                if n.value in exact or dotted.search(n.value):
                    hits.append(f"{n.lineno}: {n.value[:60]!r}")
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in n.names] if isinstance(n, ast.Import) else \
                    [n.module or ""] if n.level == 0 else []
                hits += [f"{n.lineno}: import {m}" for m in names if m.split(".")[0] in exact]
        if hits:
            out[path.relative_to(REPO_ROOT).as_posix()] = sorted(
                hits, key=lambda h: int(h.partition(":")[0]))
    return out


def test_the_core_names_no_methods_keys(tmp_path, monkeypatch):
    write_toy(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = profiles_from([EntryPoint("toy", "toymethod.profile:PROFILE", "ragrepro.methods")])
    hits = core_hits(registered() + toy)
    assert {f: h for f, h in hits.items() if f not in KNOWN} == {}
    # the check sees what it is meant to: a core line that reads a method's key
    planted = tmp_path / "core" / "planted.py"
    planted.parent.mkdir()
    planted.write_text('"""Reads ralm.stride."""\nx = cfg.get("ralm.stride")\nimport riches.plan\n'
                       'y = cfg.get("toy.max_new_tokens")\n', encoding="utf-8")
    monkeypatch.setattr(sys.modules[__name__], "CORE", planted.parent)
    monkeypatch.setattr(sys.modules[__name__], "REPO_ROOT", tmp_path)
    assert core_hits(registered() + toy) == {"core/planted.py": [
        "2: 'ralm.stride'", "3: import riches.plan", "4: 'toy.max_new_tokens'"]}


def test_a_method_declares_its_own_metrics_in_its_profile():
    """RICHES's ratio columns are described by its profile, not by the core registry's
    source; the tables find them (label, direction, resampling units) all the same."""
    for info in riches.profile.METRICS:
        assert registry.metric_info(info.name) == info
        assert f'"{info.name}"' not in inspect.getsource(registry)
    per_question = registry.metric_info("seconds_per_question")
    assert (per_question.resample, per_question.ratio) == ("ratio", ("seconds", None))
    assert per_question.higher_is_better is False
