"""The plug-in seam (ragrepro/methods.py, docs/extending.md "A method"): a fourth method that
lives only in a temporary folder, its own package and conf folder registered through a
`*.dist-info/entry_points.txt` on PYTHONPATH, runs, plans, rehearses and appears in a results
table with intervals, with zero edits to the core; and the core names no method's keys."""
from __future__ import annotations

import ast
import importlib.metadata
import inspect
import json
import re
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import yaml

import riches.profile
from ragrepro.errors import ConfigError
from ragrepro.methods import MethodProfile, profiles_from, registered
from ragrepro.metrics import registry
from ragrepro.paths import CONF_DIR, REPO_ROOT
from ragrepro.report.sample_view import ROLES
from tests.core.plugin_fixture import ragrepro, rows, write_toy

CORE = REPO_ROOT / "ragrepro"
# Core files that still name a method, each with why: none since issue 23 (the code id's
# paths, the rehearsal's fixtures and the plots' split settings come from the profiles).
KNOWN: dict[str, str] = {}
# Core YAML files (under conf/, outside every method's folder) that still name a method, each
# with why; everything else in them is checked like the rest.
KNOWN_YAML: dict[str, str] = {}


def samples_of(results: Path, experiment: str, run_id: str) -> list[dict]:
    path = results / experiment / run_id / "samples.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow  # a real embedded model
def test_a_fourth_method_in_a_temporary_folder_runs_plans_rehearses_and_tabulates(tmp_path):
    write_toy(tmp_path)
    ragrepro(tmp_path, "experiment=toy/main", "wandb.mode=disabled")
    (run,) = rows(tmp_path / "results" / "toy" / "main.csv")
    # 6 questions; the top BM25 passage holds the gold answer for the first three only
    assert float(run["passage_has_answer"]) == pytest.approx(0.5)
    assert (run["method"], run["limit"], run["toy_max_new_tokens"]) == ("toy", "6", "24")
    assert (run["retriever"], run["corpus"], run["toy_prompt"]) == ("bm25", "toy-facts", "plain")
    samples = samples_of(tmp_path / "results", "toy/main", run["run_id"])
    assert [s["passage_has_answer"] for s in samples] == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert "Constantine" in samples[0]["passage"] and "Caelifera" in samples[1]["passage"]
    # the row's model numbers are its samples' means; its diagnostics their shares
    assert float(run["em_squad"]) == pytest.approx(sum(s["em_squad"] for s in samples) / 6)
    cut = sum(s["generation"]["answer"]["finish"] == "length" for s in samples) / 6
    assert float(run["gen_answer_length"]) == pytest.approx(cut)

    plan = ragrepro(tmp_path, "plan", "experiment=toy/main", "--gpu-mem", "80", "--gpus", "1")
    (cell,) = [r for r in plan.splitlines() if r.startswith("| (default) |")]
    assert cell.split(" | ")[-2] == f"{6 * (100 + 24):,}"  # the toy profile's sizing
    assert "toy lexicon /nonexistent/toy-lexicon.tsv (MISSING)" in plan
    # the note names the training of the planned method only, not FilCo's or RALM's
    assert "training (toy reader) not in the time" in plan and "FilCo" not in plan

    ragrepro(tmp_path, "experiment=toy/main", "rehearsal=cpu", "wandb.mode=disabled",
             f"rehearsal.fixtures={tmp_path / 'fixtures'}")
    (rehearsed,) = rows(tmp_path / "results" / "rehearsal" / "toy" / "main.csv")
    # the rehearsal capped the toy's own keys: generation at 16 tokens, training at 2 steps
    assert (rehearsed["toy_max_new_tokens"], rehearsed["toy_train_steps"]) == ("16", "2")
    assert rehearsed["limit"] == "2"

    table = ragrepro(tmp_path, "table", "toy/main")  # its spec is in the toy's conf folder
    assert any("| smollm2-135m | vital-qa | 6 | plain |" in r for r in table.splitlines())
    # 50 (x100, the profile's scale) over 6 questions with its bootstrap interval: every
    # resampled mean is k/6
    (found,) = [m for m in (re.search(r"\| (\d+\.\d+) \[(\d+\.\d+), (\d+\.\d+)\] \| 6 \|",
                                      r) for r in table.splitlines()) if m]
    ours, low, high = (float(x) for x in found.groups())
    assert ours == 50.0 and 0 <= low < ours < high <= 100
    assert all(abs(b * 6 / 100 - round(b * 6 / 100)) < 1e-3 for b in (low, high))
    # ... and its results part, next to the runs, with the diagnostics' flags column
    md = (tmp_path / "results" / "toy" / "main_table.md").read_text(encoding="utf-8")
    assert md.startswith("# Toy results (main)") and "| flags |" in md
    assert "| plain | 0.500 [" in md


def test_registry_refuses_what_is_not_a_profile():
    def entry(name: str, value: str) -> EntryPoint:
        return EntryPoint(name, value, "ragrepro.methods")

    (ralm,) = profiles_from([entry("ralm", "ralm.profile:PROFILE")])
    assert ralm.name == "ralm" and ralm.packages == ("ralm",)
    with pytest.raises(ConfigError, match="not a ragrepro.methods.MethodProfile"):
        profiles_from([entry("x", "ralm.profile:sizing")])
    with pytest.raises(ConfigError, match="give the entry point the profile's name"):
        profiles_from([entry("x", "ralm.profile:PROFILE")])
    # the three shipped methods, registered by this repository's own distribution; any
    # installed plug-in comes beside them, all sorted by name (every loop of the core's order)
    shipped = sorted(e.name for e in importlib.metadata.distribution("ragrepro").entry_points
                     if e.group == "ragrepro.methods")
    assert shipped == ["filco", "ralm", "riches"]
    names = [p.name for p in registered()]
    assert names == sorted(names) and set(shipped) <= set(names)


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


def method_field_names(profiles: tuple[MethodProfile, ...]) -> set[str]:
    """The record fields, settings, flags, finish reasons and metric columns the profiles
    declare as their own (what moved out of conf/report/*.yaml and the core's registry)."""
    out = {n for p in profiles for names in p.sample_fields.values() for n in names}
    out |= {c for p in profiles for c in p.dashboard_settings}
    out |= {x for p in profiles for f in p.flags for x in (f.name, f.columns)}
    out |= {r.name for p in profiles for r in p.finish_reasons}
    out |= {m.name for p in profiles for m in p.metrics}
    return out - set(registry._CORE)  # a column the core registers is the core's name


def core_yaml_files(conf: Path, profiles: tuple[MethodProfile, ...]) -> list[Path]:
    """conf/'s YAML that is not a method's: not under a method's folder (`conf/ralm`,
    `conf/reranker`, `conf/experiment/riches`, ...), nor a report spec of a paper's tables
    and plots (`conf/report/<kind>/`), which move with the methods' conf folders."""
    roots = {n for p in profiles for n in (p.name, *p.packages, *p.config_nodes,
                                           *(g.split("/")[0] for g in p.config_groups))}
    out = []
    for path in sorted(conf.rglob("*.yaml")):
        parts = path.relative_to(conf).parts
        if parts[0] in roots or (parts[0] == "experiment" and len(parts) > 2
                                 and parts[1] in roots) or (parts[0] == "report"
                                                            and len(parts) > 2):
            continue
        out.append(path)
    return out


def _yaml_strings(node, out: list[tuple[str, str]]) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            out.append(("key", str(k)))
            _yaml_strings(v, out)
    elif isinstance(node, list):
        for v in node:
            _yaml_strings(v, out)
    elif isinstance(node, str):
        out.append(("value", node))


def core_yaml_hits(profiles: tuple[MethodProfile, ...], conf: Path = CONF_DIR
                   ) -> dict[str, list[str]]:
    """{core YAML file: hits} (comments are prose): a `_target_`-like dotted path into a
    method package, a read of a method's config node (`${ralm.stride}`, `qa.num_docs`), a
    method's config group, a defaults key naming a method's folder, or a field name a method
    declares as its own (a key only when it is not one of the samples viewer's roles)."""
    packages = {n for p in profiles for n in (p.name, *p.packages)}
    nodes = {n for p in profiles for n in p.config_nodes}
    groups = {g for p in profiles for g in p.config_groups}
    roots = nodes | packages | {g.split("/")[0] for g in groups}
    fields = method_field_names(profiles)
    dotted = re.compile(rf"(?<![\w/.-])({'|'.join(map(re.escape, sorted(nodes)))})\.\w")
    out: dict[str, list[str]] = {}
    for path in core_yaml_files(conf, profiles):
        found: list[tuple[str, str]] = []
        _yaml_strings(yaml.safe_load(path.read_text(encoding="utf-8")), found)
        hits = []
        for kind, text in found:
            head = text.lstrip("/").split("@")[0].split("/")[0]
            if (kind == "value" and "." in text and re.fullmatch(r"[\w.]+", text)
                    and text.split(".")[0] in packages) or dotted.search(text) \
                    or text in groups or (kind == "key" and text.startswith("/")
                                          and head in roots) \
                    or (text in fields and not (kind == "key" and text in ROLES)):
                hits.append(f"{kind} {text[:60]!r}")
        if hits:
            out[path.relative_to(conf).as_posix()] = hits
    return out


def test_the_cores_yaml_names_no_methods_nodes_or_fields(tmp_path, monkeypatch):
    write_toy(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    toy = profiles_from([EntryPoint("toy", "toymethod.profile:PROFILE", "ragrepro.methods")])
    profiles = registered() + toy
    # what moved out of conf/report/*.yaml is among the names checked
    assert {"diag_ctx_empty", "raw_output", "doc_titles", "rerank", "beam_size",
            "key_closed", "em_filco_code"} <= method_field_names(profiles)
    core = {p.relative_to(CONF_DIR).as_posix() for p in core_yaml_files(CONF_DIR, profiles)}
    assert {"config.yaml", "report/flags.yaml", "report/samples.yaml",
            "report/dashboard.yaml", "dataset/nq-open.yaml"} <= core
    assert not any(f.startswith(("ralm/", "riches/", "filco/", "experiment/ralm/"))
                   for f in core)
    hits = core_yaml_hits(profiles)
    assert {f: h for f, h in hits.items() if f not in KNOWN_YAML} == {}
    # the check sees what it is meant to: planted core YAML that names a method's knowledge
    planted = tmp_path / "conf"
    (planted / "report").mkdir(parents=True)
    (planted / "ralm").mkdir()
    (planted / "report" / "x.yaml").write_text(
        "# diag_ctx_empty in a comment is prose\nfields: {evidence: [context, raw_output]}\n"
        "sweep: [retriever, beam_size]\nnote: ${qa.num_docs}\n"
        "defaults: [{/riches/method: full}]\nbuild: {_target_: filco.tiny_t5.load}\n",
        encoding="utf-8")
    (planted / "ralm" / "base.yaml").write_text("stride: 4\n", encoding="utf-8")
    assert core_yaml_hits(profiles, planted) == {"report/x.yaml": [
        "value 'context'", "value 'raw_output'", "value 'beam_size'", "value '${qa.num_docs}'",
        "key '/riches/method'", "value 'filco.tiny_t5.load'"]}


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
