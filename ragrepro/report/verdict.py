"""The reproduction verdict of a paper-table cell: does our number reproduce the paper's?

An equivalence test in the TOST spirit (the rule and the margins' reasons are in
docs/statistics.md; the margins in conf/report/verdict.yaml): with p the paper's number and
m the metric's margin (relative for perplexity, absolute points for EM/F1/accuracy),

    reproduced    our whole 95% CI lies inside [p - m, p + m]  (touching an end is inside)
    differs       our whole 95% CI lies outside [p - m, p + m]
    inconclusive  the CI straddles an end of the band, or there is no CI

and before any of this, the row's recorded settings are compared with the ones the paper's
number was measured under (its `recorded` settings, ragrepro.report.paper): any difference
makes the cell "not comparable", naming the settings. Everything here is pure; nothing
knows a method's setting names (they come from the paper-number records).

    >>> m = Margin("relative", 0.05)
    >>> equivalence(19.5, 20.5, 20.0, m).status
    'reproduced'
    >>> equivalence(21.5, 23.0, 20.0, m).status
    'differs'
    >>> [d.text for d in setting_differences({"scale": "paper"}, {"scale": "mini"})]
    ['scale=mini vs paper']
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import yaml

from ..errors import ConfigError
from ..methods import conf_dirs
from .paper import PaperNumber
from .spec import SPEC_DIR

VERDICT_YAML = SPEC_DIR / "verdict.yaml"


class Settings(Protocol):
    """A row's recorded settings: a dict, or a run record with .get (runs.RunRecord)."""

    def get(self, key: str) -> Any: ...


REPRODUCED = "reproduced"
DIFFERS = "differs"
INCONCLUSIVE = "inconclusive"
NOT_COMPARABLE = "not comparable"
NO_PAPER_NUMBER = "no paper number"
NO_MARGIN = "no margin"
# Bounds are compared with this relative slack so that a CI printed as touching the band
# (e.g. 21.0 against 20 + 5%) is not pushed outside by float rounding of the margin.
_EPS = 1e-9


@dataclass(frozen=True)
class Margin:
    """How far from the paper's number ours may lie: `relative` (a fraction of it) or
    `absolute` (in its unit)."""

    kind: str
    size: float

    def __post_init__(self) -> None:
        if self.kind not in ("relative", "absolute"):
            raise ConfigError(f"margin kind {self.kind!r}; use relative or absolute.")
        if not (isinstance(self.size, (int, float)) and math.isfinite(self.size)
                and self.size >= 0):
            raise ConfigError(f"margin {self.kind}={self.size!r} must be a number >= 0.")

    def bounds(self, paper: float) -> tuple[float, float]:
        half = abs(paper) * self.size if self.kind == "relative" else self.size
        return paper - half, paper + half

    @property
    def text(self) -> str:
        if self.kind == "relative":
            return f"±{100 * self.size:g}% of the paper's value"
        return f"±{self.size:g} points"


# ------------------------------------------------------------------ settings comparison
@dataclass(frozen=True)
class Difference:
    """One setting where the row differs from the paper's number's setting."""

    key: str
    ours: Any
    paper: Any

    @property
    def text(self) -> str:
        return f"{self.key}={_show(self.ours)} vs {_show(self.paper)}"


@dataclass(frozen=True)
class Verdict:
    status: str
    detail: str = ""
    # not comparable: every setting that differs (the detail names the first few)
    differences: tuple[Difference, ...] = ()

    @property
    def text(self) -> str:
        return f"{self.status}: {self.detail}" if self.detail else self.status


def equivalence(low: float | None, high: float | None, paper: float | None,
                margin: Margin | None) -> Verdict:
    """The rule alone: our CI [low, high] against paper ± margin (same unit)."""
    if paper is None:
        return Verdict(NO_PAPER_NUMBER)
    if margin is None:
        return Verdict(NO_MARGIN)
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return Verdict(INCONCLUSIVE, "no CI")
    if low > high:
        raise ValueError(f"CI low {low} > high {high}")
    lo, hi = margin.bounds(paper)
    slack = _EPS * max(1.0, abs(lo), abs(hi))
    if low >= lo - slack and high <= hi + slack:
        return Verdict(REPRODUCED)
    if low > hi + slack or high < lo - slack:
        return Verdict(DIFFERS)
    return Verdict(INCONCLUSIVE)


def _missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float) and math.isnan(v):
        return True
    return isinstance(v, str) and v.strip().lower() in ("", "none", "null", "nan")


def _show(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "|".join(_show(x) for x in v)
    return "unset" if _missing(v) else str(v)


def same_setting(ours: Any, paper: Any) -> bool:
    """A recorded value against the paper's: missing == missing, numbers by value
    ("16" == 16 == 16.0), text case-insensitively; a list in the paper's record is a set
    of accepted values."""
    if isinstance(paper, (list, tuple)):
        return any(same_setting(ours, p) for p in paper)
    if _missing(ours) or _missing(paper):
        return _missing(ours) and _missing(paper)
    a, b = _number(ours), _number(paper)
    if a is not None and b is not None:
        return a == b
    return str(ours).strip().lower() == str(paper).strip().lower()


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def setting_differences(expected: Mapping[str, Any], recorded: Settings) -> list[Difference]:
    """Every setting of the paper's record the row does not share, in the record's order;
    a setting the row does not record counts as missing."""
    return [Difference(k, recorded.get(k), v) for k, v in expected.items()
            if not same_setting(recorded.get(k), v)]


def not_comparable(diffs: Sequence[Difference], shown: int = 1) -> Verdict:
    """The first `shown` differences by name, then how many more."""
    names = ", ".join(d.text for d in diffs[:shown])
    more = len(diffs) - shown
    return Verdict(NOT_COMPARABLE, names + (f" (+{more} more)" if more > 0 else ""),
                   tuple(diffs))


def cell_verdict(expected: Mapping[str, Any], recorded: Settings,
                 low: float | None, high: float | None, paper: float | None,
                 margin: Margin | None, extra: Sequence[Difference] = (),
                 shown: int = 1) -> Verdict:
    """Settings first (a different setting makes the numbers incomparable), then the rule.
    `extra`: differences found by the caller (e.g. our metric is not the paper's)."""
    if not expected:
        return Verdict(NOT_COMPARABLE, "the paper's record names no settings")
    diffs = [*setting_differences(expected, recorded), *extra]
    if diffs:
        return not_comparable(diffs, shown)
    return equivalence(low, high, paper, margin)


def nearest(cells: Sequence[PaperNumber], recorded: Settings) -> PaperNumber:
    """The cell whose recorded settings the row differs from least: the row's own cell, or
    the one a not-comparable row is described against."""
    # of equally near cells the most specific (more recorded settings, all shared) wins
    return min(cells, key=lambda c: (len(setting_differences(c.recorded, recorded)),
                                     -len(c.recorded)))


Interval = tuple[float | None, float | None]


def row_verdict(cells: Sequence[PaperNumber], shared: Mapping[str, Any],
                recorded: Settings, interval: Callable[[str | None], Interval],
                margins: Mapping[str, Margin] | None = None, shown: int = 1) -> Verdict:
    """The verdict of one of our rows. cells: the paper cells the row could be (its method's
    and column's, every paper model); shared: the table's settings (ragrepro.report.paper.
    table_recorded), what a row the paper has no cell for is compared with; interval(metric):
    our 95% CI of the paper cell's metric (None, None when we have none)."""
    if not cells:
        diffs = setting_differences(shared, recorded)
        return not_comparable(diffs, shown) if diffs else Verdict(NO_PAPER_NUMBER,
                                                                   "no paper cell")
    cell = nearest(cells, recorded)
    metric = cell.setting.get("metric")
    low, high = interval(metric)
    return cell_verdict(cell.recorded, recorded, low, high, cell.value,
                        margin_for(metric, margins), shown=shown)


def summary_line(verdicts: Sequence[Verdict]) -> str:
    """Every setting the not-comparable rows differ in, once, with all our values."""
    ours: dict[str, dict[str, None]] = {}
    paper: dict[str, dict[str, None]] = {}
    for v in verdicts:
        for d in v.differences:
            ours.setdefault(d.key, {})[_show(d.ours)] = None
            paper.setdefault(d.key, {})[_show(d.paper)] = None
    if not ours:
        return ""
    parts = [f"{k}={'/'.join(ours[k])} vs {'/'.join(paper[k])}" for k in ours]
    n = sum(1 for v in verdicts if v.status == NOT_COMPARABLE)
    return (f"Not comparable with the paper ({n} of {len(verdicts)} rows); settings that "
            f"differ from the paper's (ours vs paper): {', '.join(parts)}.")


# ------------------------------------------------------------------------- margins
@lru_cache(maxsize=4)
def _read(path: str) -> dict[str, Margin]:
    with open(path, encoding="utf-8") as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of metric -> margin.")
    return {str(metric): parse_margin(str(metric), node, path) for metric, node in data.items()}


def parse_margin(metric: str, node: Any, where: str = "verdict.yaml") -> Margin:
    if not isinstance(node, dict) or len(node) != 1:
        raise ConfigError(f"{where}: {metric}: {node!r}; write {{relative: 0.05}} or "
                          f"{{absolute: 3.0}} (one of the two).")
    (kind, size), = node.items()
    try:
        return Margin(str(kind), size)
    except ConfigError as e:
        raise ConfigError(f"{where}: {metric}: {e}") from None


def load_margins(path: Path | None = None) -> dict[str, Margin]:
    """metric column -> its margin: conf/report/verdict.yaml, then each method's own
    `<conf_dir>/report/verdict.yaml` for its metrics (FilCo's code-mode EM / F1); a metric
    given two margins is refused. Given a path, that file only."""
    return _read(str(path)) if path is not None else _merged_margins()


@lru_cache(maxsize=1)
def _merged_margins() -> dict[str, Margin]:
    """The core's margins, then the methods' (read once a process: every table cell asks)."""
    out = dict(_read(str(VERDICT_YAML)))
    for conf in conf_dirs():
        extra = conf / "report" / "verdict.yaml"
        if not extra.is_file():
            continue
        for metric, margin in _read(str(extra)).items():
            if metric in out and out[metric] != margin:
                raise ConfigError(f"{extra}: {metric} has a margin in conf/report/verdict.yaml "
                                  f"already ({out[metric].text}); keep one of the two.")
            out[metric] = margin
    return out


def margin_for(metric: str | None, margins: Mapping[str, Margin] | None = None) -> Margin | None:
    if not metric:
        return None
    return (load_margins() if margins is None else margins).get(metric)


def margin_line(metrics: Sequence[str], margins: Mapping[str, Margin] | None = None) -> str:
    """The sentence under a table that states the rule and the margins it used."""
    margins = load_margins() if margins is None else margins
    used = [f"{m} {margins[m].text}" for m in dict.fromkeys(metrics) if m in margins]
    return ("Verdict vs paper: reproduced when our whole 95% CI lies within the paper's "
            "number ± the margin, differs when it lies wholly outside, else inconclusive; "
            "not comparable when a recorded setting differs from the paper's (named). "
            f"Margins (conf/report/verdict.yaml): {'; '.join(used) or 'none'}; "
            "rule in docs/statistics.md.")
