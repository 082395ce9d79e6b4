"""In-Context RALM's method profile (ragrepro/methods.py): what the core asks of this
package, registered as the entry point `ralm` of the group `ragrepro.methods` (pyproject.toml).

Language modelling (`ralm.lm_eval.run`) is sized as windows x window length x scored
candidates; QA (`ralm.qa.run`, the `qa:` node) as examples x (passages + prompt + answer).
The rehearsal caps the predictive reranker's training and QA's answer budget, points the
WikiText-103 forbidden-titles list at its fixture, and fails a retrieval cell whose fixture
text never reached a window with a document.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hydra.utils import get_object
from omegaconf import DictConfig, OmegaConf

from ragrepro.errors import ConfigError
from ragrepro.methods import (
    Decoding,
    MethodProfile,
    PlanExtras,
    PlannerHooks,
    RehearsalHooks,
    Sizing,
    TrainingBudget,
    eval_examples,
    eval_tokens,
    qa_forward_tokens,
)

from .rerank import Rerank, not_a_variant
from .windows import expected_window_count

FORBIDDEN_TITLES_FIXTURE = Path("ralm") / "wikitext103_forbidden_titles.txt"
# Evaluation sizes of the splits RALM's paper configs read: WikiText-103 test in words (the
# language-modelling figures and tables), the DPR files' test questions (QA, Table 4).
EVAL_SIZES = {"wikitext-103": 245_569, "nq-open-dpr": 3_610, "triviaqa-dpr": 11_313}


def _sel(cfg: DictConfig, key: str, default: Any = None) -> Any:
    return OmegaConf.select(cfg, key, default=default)


def rerank_of(cfg: DictConfig) -> Rerank | None:
    """The variant of a cell's `ralm.rerank` node (`{_target_: ralm.rerank.<Class>}`, chosen by
    the ralm/rerank group), without building the run; None outside RALM language modelling."""
    node = _sel(cfg, "ralm.rerank")
    if node is None:
        return None
    target = node.get("_target_") if isinstance(node, (dict, DictConfig)) else None
    if target is None:
        raise not_a_variant(node)
    found = get_object(str(target))
    if not (isinstance(found, type) and issubclass(found, Rerank)):
        raise ConfigError(f"ralm.rerank._target_={target} is not a ralm.rerank.Rerank class.")
    return found()


def id_view(resolved: dict[str, Any]) -> dict[str, Any]:
    """The run id hashes the variant by its name (`zeroshot`), as it did when `ralm.rerank`
    was a plain name, so runs finished before the variants became a config group are reused."""
    node = resolved.get("ralm")
    rerank = node.get("rerank") if isinstance(node, dict) else None
    if not (isinstance(rerank, dict) and "_target_" in rerank):
        return resolved
    return {**resolved, "ralm": {**node, "rerank": get_object(str(rerank["_target_"])).name}}


def lm_forward_tokens(tokens: int, stride: int, max_length: int, passes: int) -> int:
    """Language modelling: the engine's windows (ralm.windows.expected_window_count: the first
    of max_length tokens, then one every stride) of max_length tokens, `passes` LM passes
    each (k when the variant LM-ranks k candidates)."""
    return expected_window_count(tokens, max_length, stride) * min(max_length, tokens) * passes


def lm_scored_tokens(tokens: int, passes: int) -> int:
    """Positions whose vocabulary logits a language-modelling cell computes: every token but
    the first is scored once, in each of the window's `passes`."""
    return max(tokens - 1, 0) * passes


def is_lm_cell(cfg: DictConfig) -> bool:
    return bool(_sel(cfg, "ralm.stride")) and _sel(cfg, "dataset.task") == "lm"


def sizing(cfg: DictConfig) -> Sizing:
    """Language modelling: the engine's windows of max_length tokens, times the LM
    passes the rerank variant makes per window (k when it LM-ranks the candidates); QA:
    examples x (num_docs x 160 + 64 + max_new_tokens). A language-modelling cell scores one
    window at a time (batch 1)."""
    if is_lm_cell(cfg):
        # k as configured: read only by a variant that LM-ranks its candidates
        v = rerank_of(cfg)
        passes = v.candidates(_sel(cfg, "ralm.k", 1)) if v is not None else 1
        n = eval_tokens(cfg)
        tokens = lm_forward_tokens(n, int(_sel(cfg, "ralm.stride")),
                                   int(_sel(cfg, "ralm.max_length", 1024)), passes)
        scored: int | None = lm_scored_tokens(n, passes)
    else:
        scored = None
        tokens = qa_forward_tokens(cfg, int(_sel(cfg, "qa.num_docs", 0) or 1),
                                   int(_sel(cfg, "qa.max_new_tokens", 0) or 32))
    batch = 1 if _sel(cfg, "ralm") is not None else \
        int(_sel(cfg, "qa.batch_size") or _sel(cfg, "batch_size") or 1)
    return Sizing(tokens, int(_sel(cfg, "ralm.max_length") or 2048), batch, scored)


def decoding(cfg: DictConfig) -> Decoding | None:
    """QA generates greedily: examples x qa.max_new_tokens after num_docs passages and the
    prompt, qa.batch_size at a time; language modelling only scores (None)."""
    if is_lm_cell(cfg):
        return None
    docs = int(_sel(cfg, "qa.num_docs", 0) or 1)
    batch = int(_sel(cfg, "qa.batch_size") or _sel(cfg, "batch_size") or 1)
    return Decoding(eval_examples(cfg), int(_sel(cfg, "qa.max_new_tokens", 0) or 32),
                    docs * 160 + 64, batch)


def plan(cfg: DictConfig, tflops: float) -> PlanExtras:
    """The ragrepro plan hook: the cell's sizing and, for WikiText-103, the forbidden-titles
    file (`auto` and `none` are not files: shown as missing until a path is given)."""
    files: list[tuple[str, str, bool]] = []
    given = _sel(cfg, "ralm.forbidden_titles")
    if _sel(cfg, "ralm") is not None and _sel(cfg, "dataset.name") == "wikitext-103":
        files.append(("forbidden titles", str(given), given not in (None, "auto", "none")
                      and Path(str(given)).expanduser().exists()))
    return PlanExtras(files=files, sizing=sizing(cfg), decoding=decoding(cfg))


def training_caps(cfg: DictConfig, budget: TrainingBudget) -> dict[str, object]:
    """The predictive reranker trains `budget.steps` steps on at most `budget.examples`."""
    if _sel(cfg, "reranker.steps") is None:
        return {}
    return {"reranker.steps": min(int(_sel(cfg, "reranker.steps")), budget.steps),
            "reranker.n_examples": min(int(_sel(cfg, "reranker.n_examples")), budget.examples),
            "reranker.examples_per_text": min(int(_sel(cfg, "reranker.examples_per_text")),
                                              budget.examples),
            "reranker.batch_size": min(int(_sel(cfg, "reranker.batch_size")), budget.batch)}


def fixture_locations(cfg: DictConfig, root: Path) -> dict[str, object]:
    """WikiText-103's forbidden titles from the fixtures when the cell names no file."""
    if _sel(cfg, "ralm") is not None and _sel(cfg, "ralm.forbidden_titles") in (None, "auto") \
            and _sel(cfg, "dataset.name") == "wikitext-103":
        return {"ralm.forbidden_titles": str(root / FORBIDDEN_TITLES_FIXTURE)}
    return {}


def write_fixtures(root: Path, articles: Sequence[tuple[str, str]], n_rows: int) -> None:
    """The rehearsal's WikiText-103 forbidden-titles file: the titles of the articles just
    after the first split's rows, one quoted title per line (the official file's format)."""
    path = root / FORBIDDEN_TITLES_FIXTURE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'"{t}"\n' for t, _ in articles[n_rows:2 * n_rows + 1]),
                    encoding="utf-8")


def coverage(cfg: DictConfig, metrics: Mapping[str, Any] | None) -> str:
    """A retrieval cell whose text fit in the first window never retrieved."""
    v = rerank_of(cfg)
    if v is not None and v.retrieves and metrics and metrics.get("n_windows_with_doc") == 0:
        return (f"ralm/rerank={v.name} but no window had a document: the fixture text is shorter "
                f"than one window, so retrieval was never exercised")
    return ""


PROFILE = MethodProfile(
    name="ralm",
    packages=("ralm",),
    config_nodes=("ralm", "qa", "reranker", "scorer", "label_model"),
    conf_dir=Path(__file__).parent / "conf",  # its experiments, groups and report specs
    config_groups=("scorer", "reranker", "ralm/rerank"),
    id_view=id_view,
    # perplexity windows: window / text / query / doc_title; QA: doc_titles and `em` (the
    # official eval_qa.py name)
    sample_fields={"id": ("window",), "group": ("text",), "question": ("query",),
                   "evidence": ("doc_titles", "doc_title"), "score": ("em",)},
    dashboard_settings=("rerank", "stride", "retrieval_stride", "query_len", "k", "num_docs"),
    planner=PlannerHooks(plan=plan, untimed_training="reranker", eval_sizes=EVAL_SIZES),
    rehearsal=RehearsalHooks(generation_keys=("qa.max_new_tokens",),
                             training_caps=training_caps,
                             fixture_locations=fixture_locations,
                             write_fixtures=write_fixtures,
                             coverage=coverage),
    # the word-count rule of word-level perplexity (and the row's older column name)
    split_settings=("word_count", "word_count_rule"),
)
