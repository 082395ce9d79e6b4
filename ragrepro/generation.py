"""Generation diagnostics: why each generation stopped, and the per-row rates of it.

A weak row can come from the model or from the harness (a budget that cuts every answer
off, a prompt truncated on the left, a filter that outputs nothing). Every generating
pipeline records, per sample, one `GenerationRecord` per generation stage under the sample's
`generation` mapping (stage name -> record fields), and any method-specific facts under
`diag` (name -> bool or number). `summarize` turns a run's samples into row columns:

    gen_<stage>_length    share of outputs that hit max_new_tokens
    gen_<stage>_empty     share of empty outputs (after the pipeline's parsing)
    gen_<stage>_truncated share of prompts cut on the left to fit the context
    gen_<stage>_<reason>  share that ended for each finish reason: the core's eos, stop and
                          length, and each method's own (its profile's `finish_reasons`)
    gen_<stage>_output_tokens  mean output length in tokens
    diag_<name>           mean of a method's per-sample fact (a rate for booleans)

The core knows no stage, diag or method finish-reason name: the pipelines choose them (RALM
QA `answer`, FilCo `filter` and `answer`, RICHES `answer`, ...).
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .errors import ConfigError
from .methods import FinishReason, MethodProfile, registered

# The ways any generation ends; a method adds its own through its profile.
CORE_FINISH_REASONS = (
    FinishReason("eos", "the model emitted an end-of-sequence token"),
    FinishReason("stop", "the caller stopped it (a stop string, or short of the budget)"),
    FinishReason("length", "it filled max_new_tokens: the budget cut it off", normal=False),
)


def declared_finish_reasons(profiles: Iterable[MethodProfile] | None = None
                            ) -> tuple[FinishReason, ...]:
    """The core's finish reasons and every method's, the normal ones first (core, then
    methods in profile order) and the cut-offs last, so `length` stays the last rate column."""
    found: dict[str, FinishReason] = {}
    for reason in (*CORE_FINISH_REASONS,
                   *(r for p in (registered() if profiles is None else profiles)
                     for r in p.finish_reasons)):
        found.setdefault(reason.name, reason)
    return tuple(sorted(found.values(), key=lambda r: not r.normal))


def finish_reasons(profiles: Iterable[MethodProfile] | None = None) -> tuple[str, ...]:
    """The names of declared_finish_reasons."""
    return tuple(r.name for r in declared_finish_reasons(profiles))


def finish_reason(raw_new: Sequence[int], eos_ids: Iterable[int] | int | None,
                  max_new_tokens: int, stopped: bool = False) -> str:
    """Why one generation ended, from its raw new tokens (before any EOS stripping).

    An EOS token anywhere means the model ended it; otherwise a caller-detected stop
    (a stop string, a closed key) wins; otherwise a full budget is `length`. A row that
    neither ended nor filled its budget stopped for a caller's reason (`stop`)."""
    eos = {eos_ids} if isinstance(eos_ids, int) else set(eos_ids or ())
    if any(int(t) in eos for t in raw_new):
        return "eos"
    if stopped:
        return "stop"
    return "length" if len(raw_new) >= max_new_tokens else "stop"


@dataclass(frozen=True)
class GenerationRecord:
    """What one generation of one sample was: the facts a reader needs to tell 'the model
    cannot' from 'the harness cut it off'."""

    finish: str
    prompt_tokens: int
    output_tokens: int
    truncated: bool
    empty: bool

    def __post_init__(self) -> None:
        known = finish_reasons()
        if self.finish not in known:
            raise ValueError(f"finish={self.finish!r}; one of {known} (a method declares its "
                             f"own in its profile's finish_reasons)")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def record(finish: str, prompt_tokens: int, output_tokens: int, *, truncated: bool = False,
           prediction: str | None = None) -> dict[str, Any]:
    """The per-sample dict of one stage; `prediction` (the parsed output) sets `empty`."""
    empty = prediction is not None and not prediction.strip()
    return GenerationRecord(finish, int(prompt_tokens), int(output_tokens), bool(truncated),
                            empty).as_dict()


def summarize(samples: Iterable[Mapping[str, Any]],
              reasons: Sequence[str] | None = None) -> dict[str, float]:
    """Row columns from the samples' `generation` and `diag` mappings (see module doc);
    `reasons`: the finish reasons counted (None: every declared one)."""
    reasons = finish_reasons() if reasons is None else tuple(reasons)
    stages: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    diags: dict[str, list[float]] = defaultdict(list)
    for s in samples:
        for stage, rec in (s.get("generation") or {}).items():
            stages[stage].append(rec)
        for name, value in (s.get("diag") or {}).items():
            if value is not None:
                diags[name].append(float(value))
    out: dict[str, float] = {}
    for stage, recs in sorted(stages.items()):
        out.update(_stage_rates(stage, recs, reasons))
    for name, values in sorted(diags.items()):
        out[f"diag_{name}"] = sum(values) / len(values)
    return out


def _stage_rates(stage: str, recs: Sequence[Mapping[str, Any]],
                 reasons: Sequence[str]) -> dict[str, float]:
    n = len(recs)
    out = {f"gen_{stage}_{reason}": sum(r.get("finish") == reason for r in recs) / n
           for reason in reasons}
    out[f"gen_{stage}_empty"] = sum(bool(r.get("empty")) for r in recs) / n
    out[f"gen_{stage}_truncated"] = sum(bool(r.get("truncated")) for r in recs) / n
    out[f"gen_{stage}_output_tokens"] = sum(int(r.get("output_tokens") or 0) for r in recs) / n
    return out


# -- budgets that fit ----------------------------------------------------------------------
def longest_output(encode: Callable[[str], Sequence[int]], outputs: Iterable[str]) -> int:
    """Token length of the longest demonstration output under this run's tokenizer."""
    return max((len(encode(o)) for o in outputs), default=0)


def check_budget(key: str, max_new_tokens: int, outputs: Iterable[str],
                 encode: Callable[[str], Sequence[int]], what: str = "demonstration") -> int:
    """Refuse a generation budget smaller than the longest output the prompt itself shows
    the model (a budget that cannot hold the demonstrations' own answers cuts every
    generation off, and the row measures the harness). Returns the needed value."""
    need = longest_output(encode, outputs)
    if int(max_new_tokens) < need:
        raise ConfigError(
            f"{key}={max_new_tokens} is smaller than the longest {what} output of this "
            f"prompt ({need} tokens with this run's tokenizer): generations would be cut off "
            f"before they can end. Set {key}={need} or more.")
    return need
