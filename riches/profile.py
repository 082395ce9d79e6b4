"""RICHES's method profile (ragrepro/methods.py): what the core asks of this package,
registered as the entry point `riches` of the group `ragrepro.methods` (pyproject.toml).

`ragrepro plan` gets the judge model, the Factoid-Wiki files and the suffix-array index from
riches/plan.py; the rehearsal caps the three generation budgets (RICHES's constrained decode,
the dense reader, the iterative baseline) and points empty Factoid-Wiki paths at the fixture.
The command-line check knows the variant group `riches/method`.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from ragrepro.methods import (
    FinishReason,
    MethodProfile,
    PlanExtras,
    PlannerHooks,
    RehearsalHooks,
)
from ragrepro.metrics.registry import Metric

FACTOID_WIKI_FIXTURE = Path("riches") / "factoid-wiki.jsonl"
PROMPT_DIR = Path(__file__).parent / "conf" / "riches" / "prompts"  # the shipped few-shot prompts


def plan(cfg: DictConfig, tflops: float) -> PlanExtras:
    """riches.plan.plan_extras. Imported when a cell is planned, not when the profile is
    read (at every Hydra start): it sizes models from their architectures (torch,
    transformers) and the suffix array (pydivsufsort), a deliberate deferral."""
    from .plan import plan_extras  # deferred: torch, transformers and pydivsufsort

    return plan_extras(cfg, tflops)


def fixture_locations(cfg: DictConfig, root: Path) -> dict[str, object]:
    """Factoid-Wiki keys from the fixture file when the cell names none."""
    sel = lambda key: OmegaConf.select(cfg, key, default=None)
    if sel("riches.key.source") == "factoid-wiki" and not sel("riches.key.paths"):
        return {"riches.key.paths": [str(root / FACTOID_WIKI_FIXTURE)]}
    return {}


def demo_propositions(prompt_dir: Path = PROMPT_DIR) -> dict[str, list[str]]:
    """title -> propositions of every demonstration step in the RICHES prompt files."""
    out: dict[str, list[str]] = {}
    for path in sorted(prompt_dir.glob("*.yaml")):
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for ex in cfg.get("examples") or []:
            for step in ex.get("steps") or []:
                if step.get("title"):
                    props = out.setdefault(str(step["title"]), [])
                    if step.get("proposition") and step["proposition"] not in props:
                        props.append(str(step["proposition"]))
    return out


def fixture_titles() -> list[str]:
    """The demonstrations' source articles: their keys must be verbatim in the fixture index,
    as a user's prompt must be at paper scale."""
    return list(demo_propositions())


def write_fixtures(root: Path, articles: Sequence[tuple[str, str]], n_rows: int,
                   demo_props: Mapping[str, Sequence[str]] | None = None) -> None:
    """The rehearsal's Factoid-Wiki: three propositions per article (its first sentences),
    plus the demonstrations' own propositions for their articles (`demo_props`, default: the
    shipped prompts')."""
    demos = demo_propositions() if demo_props is None else demo_props
    rows = [{"title": t, "propositions": [*(s.strip() + "." for s in x.split(". ")[:3]
                                           if s.strip()), *demos.get(t, [])]}
            for t, x in articles]
    path = root / FACTOID_WIKI_FIXTURE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


# Ratios of two per-sample fields of RICHES's samples (resampled per question for their CIs).
METRICS = (
    Metric("keys_per_answer", "keys_per_answer", resample="ratio", ratio=("n_keys", None)),
    Metric("verbatim_rate", "verbatim_rate", resample="ratio",
               ratio=("keys_verbatim", "n_keys")),
    Metric("seconds_per_question", "seconds_per_question", higher_is_better=False,
               resample="ratio", ratio=("seconds", None)),
)

# A generation ended by closing a key (a constrained decode that stops at the key's end
# marker): a `gen_<stage>_key_closed` rate column beside the core's eos / stop / length.
FINISH_REASONS = (
    FinishReason("key_closed", "the constrained decode stopped when a retrieval key closed"),
)
# Evaluation sizes (examples) of the splits RICHES's paper configs read.
EVAL_SIZES = {"nq-open": 3_610, "hotpotqa": 7_405, "musique": 2_417}

PROFILE = MethodProfile(
    name="riches",
    packages=("riches",),
    config_nodes=("riches",),
    conf_dir=Path(__file__).parent / "conf",  # its experiments, groups and report specs
    config_groups=("riches/method",),
    metrics=METRICS,
    finish_reasons=FINISH_REASONS,
    sample_fields={"evidence": ("evidence", "retrieved_titles")},
    dashboard_settings=("k", "key_type", "beam_size"),
    planner=PlannerHooks(plan=plan, eval_sizes=EVAL_SIZES),
    rehearsal=RehearsalHooks(
        generation_keys=("riches.max_new_tokens", "riches.reader_max_new_tokens",
                         "riches.iterative.max_new_tokens"),
        fixture_locations=fixture_locations,
        fixture_titles=fixture_titles,
        write_fixtures=write_fixtures),
)
