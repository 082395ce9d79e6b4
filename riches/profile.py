"""RICHES's method profile (ragrepro/methods.py): what the core asks of this package,
registered as the entry point `riches` of the group `ragrepro.methods` (pyproject.toml).

`ragrepro plan` gets the judge model, the Factoid-Wiki files and the suffix-array index from
riches/plan.py; the rehearsal caps the three generation budgets (RICHES's constrained decode,
the dense reader, the iterative baseline) and points empty Factoid-Wiki paths at the fixture.
The command-line check knows the variant group `riches/method`.
"""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ragrepro.methods import MethodProfile, PlanExtras
from ragrepro.metrics.registry import MetricInfo

FACTOID_WIKI_FIXTURE = Path("riches") / "factoid-wiki.jsonl"


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


# Ratios of two per-sample fields of RICHES's samples (resampled per question for their CIs).
METRICS = (
    MetricInfo("keys_per_answer", "keys_per_answer", resample="ratio", ratio=("n_keys", None)),
    MetricInfo("verbatim_rate", "verbatim_rate", resample="ratio",
               ratio=("keys_verbatim", "n_keys")),
    MetricInfo("seconds_per_question", "seconds_per_question", higher_is_better=False,
               resample="ratio", ratio=("seconds", None)),
)

PROFILE = MethodProfile(
    name="riches",
    packages=("riches",),
    config_nodes=("riches",),
    conf_dir=None,  # conf/riches lives in the repository's conf/
    config_groups=("riches/method",),
    generation_keys=("riches.max_new_tokens", "riches.reader_max_new_tokens",
                     "riches.iterative.max_new_tokens"),
    plan=plan,
    fixture_locations=fixture_locations,
    metrics=METRICS,
)
