"""What `rehearsal=cpu` changes in a composed config: locations (files, results folder,
device), the model's row name, and the size of training (like `limit` for evaluation).
Every other setting that defines the experiment stays."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from .fixtures import PILE
from .real import real_overrides


def location_overrides(cfg: DictConfig, root: Path) -> dict[str, object]:
    """Pure: {dotted key: fixture location} for the files this config needs and lacks."""
    sel = lambda key: OmegaConf.select(cfg, key, default=None)
    out: dict[str, object] = {}
    if sel("corpus.name") == "wikipedia-dpr" and not sel("corpus.path"):
        out["corpus.path"] = str(root / "dpr" / "psgs_w100.tsv")
    if sel("dataset.name") in PILE and not sel("dataset.path"):
        out["dataset.path"] = str(root / "pile" / f"{sel('dataset.name')}.jsonl")
    if sel("ralm") is not None and sel("ralm.forbidden_titles") in (None, "auto") \
            and sel("dataset.name") == "wikitext-103":
        out["ralm.forbidden_titles"] = str(root / "ralm" / "wikitext103_forbidden_titles.txt")
    if sel("riches.key.source") == "factoid-wiki" and not sel("riches.key.paths"):
        out["riches.key.paths"] = [str(root / "riches" / "factoid-wiki.jsonl")]
    return out


def standin_names(cfg: DictConfig) -> dict[str, str]:
    """Row names that say stand-in: the model, and the retriever encoder when swapped."""
    from .standins import needs_standin, standin_name

    out = {}
    for key in ("model", "retriever.encoder"):
        src, name = (OmegaConf.select(cfg, f"{key}.{f}", default=None) for f in ("source", "name"))
        if src and name and needs_standin(str(src)):
            out[f"{key}.name"] = standin_name(str(name))
    return out


def training_caps(cfg: DictConfig, steps: int, examples: int,
                  batch: int = 4) -> dict[str, object]:
    """Pure: cap training like `limit` caps evaluation (reranker steps/examples, FilCo steps)."""
    sel = lambda key: OmegaConf.select(cfg, key, default=None)
    out: dict[str, object] = {}
    if sel("reranker.steps") is not None:
        out["reranker.steps"] = min(int(sel("reranker.steps")), steps)
        out["reranker.n_examples"] = min(int(sel("reranker.n_examples")), examples)
        out["reranker.examples_per_text"] = min(int(sel("reranker.examples_per_text")), examples)
        out["reranker.batch_size"] = min(int(sel("reranker.batch_size")), batch)
    if sel("filco.train.common") is not None:
        given = sel("filco.train.common.max_steps")
        out["filco.train.common.max_steps"] = min(int(given), steps) if given else steps
    return out


GENERATION_KEYS = ("filco.ctx_max_new_tokens", "filco.gen_max_new_tokens", "qa.max_new_tokens",
                   "riches.max_new_tokens", "riches.reader_max_new_tokens",
                   "riches.iterative.max_new_tokens")


def generation_caps(cfg: DictConfig, cap: int) -> dict[str, object]:
    """Pure: at most `cap` new tokens per generation (null = the method's default: capped)."""
    out: dict[str, object] = {}
    for key in GENERATION_KEYS:
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
