"""What `rehearsal=cpu` changes in a composed config: locations (files, results folder,
device), the model's row name, and the size of training (like `limit` for evaluation).
Every other setting that defines the experiment stays. What a method adds (its training and
generation keys, its fixture files) comes from its profile (ragrepro/methods.py)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from ..methods import MethodProfile, TrainingBudget, registered
from .fixtures import PILE
from .real import real_overrides
from .standins import needs_standin, standin_name


def location_overrides(cfg: DictConfig, root: Path,
                       profiles: Sequence[MethodProfile] | None = None) -> dict[str, object]:
    """Pure given the profiles: {dotted key: fixture location} for the files this config
    needs and lacks (the corpus and dataset here, a method's files by its profile)."""
    sel = lambda key: OmegaConf.select(cfg, key, default=None)
    out: dict[str, object] = {}
    if sel("corpus.name") == "wikipedia-dpr" and not sel("corpus.path"):
        out["corpus.path"] = str(root / "dpr" / "psgs_w100.tsv")
    if sel("dataset.name") in PILE and not sel("dataset.path"):
        out["dataset.path"] = str(root / "pile" / f"{sel('dataset.name')}.jsonl")
    for profile in registered() if profiles is None else profiles:
        if profile.rehearsal.fixture_locations is not None:
            out.update(profile.rehearsal.fixture_locations(cfg, root))
    return out


def standin_names(cfg: DictConfig) -> dict[str, str]:
    """Row names that say stand-in: the model, and the retriever encoder when swapped."""
    out = {}
    for key in ("model", "retriever.encoder"):
        src, name = (OmegaConf.select(cfg, f"{key}.{f}", default=None) for f in ("source", "name"))
        if src and name and needs_standin(str(src)):
            out[f"{key}.name"] = standin_name(str(name))
    return out


def training_caps(cfg: DictConfig, steps: int, examples: int, batch: int = 4,
                  profiles: Sequence[MethodProfile] | None = None) -> dict[str, object]:
    """Pure given the profiles: cap training like `limit` caps evaluation, each method its own
    training keys (its profile's `training_caps`)."""
    budget = TrainingBudget(steps, examples, batch)
    out: dict[str, object] = {}
    for profile in registered() if profiles is None else profiles:
        if profile.rehearsal.training_caps is not None:
            out.update(profile.rehearsal.training_caps(cfg, budget))
    return out


def generation_keys(profiles: Sequence[MethodProfile] | None = None) -> tuple[str, ...]:
    """The generation budgets (max new tokens) the methods declare, in profile order."""
    return tuple(k for p in (registered() if profiles is None else profiles)
                 for k in p.rehearsal.generation_keys)


def generation_caps(cfg: DictConfig, cap: int,
                    profiles: Sequence[MethodProfile] | None = None) -> dict[str, object]:
    """Pure given the profiles: at most `cap` new tokens per generation (null = the method's
    default: capped)."""
    out: dict[str, object] = {}
    for key in generation_keys(profiles):
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None)
        if node is not None and leaf in node:
            value = node[leaf]
            out[key] = cap if value is None else min(int(value), cap)
    return out


def uncapped(cfg: DictConfig, caps: dict[str, object]) -> dict[str, object]:
    """Pure: {dotted key: configured value} of every generation budget the cap changed.
    Recorded as `rehearsal.uncapped`, so a pipeline checks the budget it was configured
    with (ragrepro.generation.check_budget) while it runs under the cap."""
    return {k: OmegaConf.select(cfg, k, default=None) for k, v in caps.items()
            if OmegaConf.select(cfg, k, default=None) != v}


def apply(cfg: DictConfig, root: Path, results: Path) -> None:
    """Point `cfg` at the fixtures and the rehearsal results folder (in place)."""
    caps = training_caps(cfg, int(OmegaConf.select(cfg, "rehearsal.train_steps", default=2)),
                         int(OmegaConf.select(cfg, "rehearsal.train_examples", default=32)),
                         int(OmegaConf.select(cfg, "rehearsal.train_batch_size", default=4)))
    # Real mode (rehearsal.real_models, ragrepro/rehearsal/real.py): a cell whose family has
    # an embedded member loads it, and its budgets stay as configured: the point is to see
    # whether real generations end inside them. Stand-in cells keep the cap.
    real_mode = bool(OmegaConf.select(cfg, "rehearsal.real_models", default=False))
    swap = real_overrides(cfg) if real_mode else {}
    gen_caps = {} if swap else generation_caps(
        cfg, int(OmegaConf.select(cfg, "rehearsal.max_new_tokens", default=16)))
    changes: dict[str, object] = {**location_overrides(cfg, root), **standin_names(cfg),
                                  **caps, "device": "cpu", **gen_caps, **swap}
    if uncapped(cfg, gen_caps):
        changes["rehearsal.uncapped"] = uncapped(cfg, gen_caps)
    if not cfg.get("results_dir"):
        # real-mode rows are kept apart from the stand-in rows `make rehearse` tabulates
        folder = results / "rehearsal"
        changes["results_dir"] = str(folder / "real" if real_mode else folder)
    with open_dict(cfg):
        for key, value in changes.items():
            OmegaConf.update(cfg, key, value, force_add=True)
