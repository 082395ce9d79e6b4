"""FilCo's method profile (ragrepro/methods.py): what the core asks of this package,
registered as the entry point `filco` of the group `ragrepro.methods` (pyproject.toml).

A cell is sized as examples x (k passages + prompt + the generator's answer budget) over
sequences of `max_input_tokens`; the rehearsal caps M_ctx / M_gen training steps and both
generation budgets (filtered context, answer).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from ragrepro.methods import (
    Decoding,
    FlagDecl,
    MethodProfile,
    PlanExtras,
    PlannerHooks,
    RehearsalHooks,
    Sizing,
    TrainingBudget,
    eval_examples,
    qa_forward_tokens,
)

from .metrics import METRICS

# Evaluation sizes (examples) of the splits FilCo's paper configs read (its Table 1).
EVAL_SIZES = {"nq-open": 3_610, "triviaqa": 11_313, "hotpotqa": 7_405, "fever": 10_444,
              "wow": 3_054, "eli5": 1_507}


def _sel(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def sizing(cfg: DictConfig) -> Sizing:
    """examples x (k x 160 + 64 + gen_max_new_tokens) tokens; max_input_tokens sequences,
    `batch_size` at a time."""
    tokens = qa_forward_tokens(cfg, int(_sel(cfg, "filco.k", 0) or 1),
                               int(_sel(cfg, "filco.gen_max_new_tokens", 0) or 32))
    return Sizing(tokens, int(_sel(cfg, "filco.max_input_tokens") or 2048),
                  int(_sel(cfg, "batch_size") or 1))


def filters(cfg: DictConfig) -> bool:
    """Whether the cell's setting generates filtered contexts with M_ctx (the FilCo setting
    and its ablations: `filco.setting._target_` names filco.variants.FilCo or a subclass)."""
    target = str(_sel(cfg, "filco.setting._target_") or "")
    if not target:
        return False
    from filco.variants import FilCo  # deferred: the variants import the pipeline's types

    found = get_object(target)
    return isinstance(found, type) and issubclass(found, FilCo)


def decoding(cfg: DictConfig) -> Decoding:
    """Greedy generation, `batch_size` examples at a time after k passages and the prompt:
    the answer (gen_max_new_tokens), and for a filtering setting the filtered context before
    it (ctx_max_new_tokens; the same examples, counted as more steps of one generation)."""
    steps = int(_sel(cfg, "filco.gen_max_new_tokens", 0) or 32)
    if filters(cfg):
        steps += int(_sel(cfg, "filco.ctx_max_new_tokens", 0) or 0)
    context = int(_sel(cfg, "filco.k", 0) or 1) * 160 + 64
    return Decoding(eval_examples(cfg), steps, context, int(_sel(cfg, "batch_size") or 1))


def plan(cfg: DictConfig, tflops: float) -> PlanExtras:
    """The ragrepro plan hook: FilCo adds its sizing and decoding (its models are the cell's
    LM)."""
    return PlanExtras(sizing=sizing(cfg), decoding=decoding(cfg))


def training_caps(cfg: DictConfig, budget: TrainingBudget) -> dict[str, object]:
    """M_ctx and M_gen train at most `budget.steps` steps (null max_steps: epochs, capped)."""
    if _sel(cfg, "filco.train.common") is None:
        return {}
    given = _sel(cfg, "filco.train.common.max_steps")
    return {"filco.train.common.max_steps": min(int(given), budget.steps) if given
            else budget.steps}


def id_view(resolved: dict[str, Any]) -> dict[str, Any]:
    """The run id hashes a setting by its name (`psg`), as it did when `filco.setting` was a
    plain name, so runs finished before the settings became components are reused."""
    node = resolved.get("filco")
    setting = node.get("setting") if isinstance(node, dict) else None
    if not (isinstance(setting, dict) and "_target_" in setting):
        return resolved
    name = get_object(str(setting["_target_"])).name
    return {**resolved, "filco": {**node, "setting": name}}


PROFILE = MethodProfile(
    name="filco",
    packages=("filco",),
    config_nodes=("filco", "train_dataset"),
    conf_dir=Path(__file__).parent / "conf",  # its experiments, groups and report specs
    id_view=id_view,
    metrics=METRICS,
    sample_fields={"group": ("setting",), "output": ("raw_output",), "evidence": ("context",),
                   "score": ("score",)},
    dashboard_settings=("top_k", "measure", "context"),
    flags=(FlagDecl("ctx_empty", "diag_ctx_empty", 0.20,
                    "At least 20% of the filtered contexts are empty: the generator read a "
                    "prompt with no evidence (for FilCo, a prompt shape it may never have "
                    "seen in training)."),),
    planner=PlannerHooks(plan=plan, untimed_training="FilCo", eval_sizes=EVAL_SIZES),
    rehearsal=RehearsalHooks(
        generation_keys=("filco.ctx_max_new_tokens", "filco.gen_max_new_tokens"),
        training_caps=training_caps),
)
