"""Per-sample flips between two runs: which questions or blocks changed outcome, and how.

A paired test says whether run B differs from run A on average; this module says on which
samples. Samples are paired exactly as the paired test pairs them: the resampling units of
ragrepro.report.samples.units_for (one per question id for QA metrics, one per block of
consecutive perplexity windows keyed by (text, first window)), so a flip listing and the
paired test beside it always speak of the same samples.

Outcomes:
  QA metrics (a per-question score in [0, 1]): a 0/1 score (EM, accuracy, AutoAIS
    attribution) is right at 1; a graded one (token F1) is right above GRADED_RIGHT_ABOVE
    (0.5), and its flips are listed by largest change. Each pair of scores is right->wrong,
    wrong->right, both right or both wrong.
  Perplexity blocks: no right or wrong. Each block's NLL per scored token (whether
    ppl_token or ppl_word is paired) is better, worse or the same in B; "the same" within TIE_RTOL of the larger
    value, the tolerance the permutation test gives float reduction noise (ragrepro.stats),
    so a block that moved by noise is not called a change.

Pure functions classify; `pair_flips` reads the two runs; `item_texts` reads what to show.
"""
from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..metrics.registry import metric_info, metric_infos
from ..stats import TIE_RTOL, Units
from .runs import RunRecord
from .sample_view import ViewConfig, finishes, load_view_config, one_line, pick
from .samples import DEFAULT_STATS, StatsSettings, read_records, units_for
from .samples import _key as record_key  # the paired test's key: one definition

# A graded per-question score (token F1) counts as right above this: more than half of the
# answer's tokens match, the usual reading of SQuAD F1 when a yes/no is needed.
GRADED_RIGHT_ABOVE = 0.5

OUTCOME_COUNTS = ("right_to_wrong", "wrong_to_right", "both_right", "both_wrong")
NLL_COUNTS = ("worse", "better", "same")
LABELS = {"right_to_wrong": "right→wrong", "wrong_to_right": "wrong→right",
          "both_right": "both right", "both_wrong": "both wrong",
          "worse": "worse", "better": "better", "same": "same"}
# What the same flips read with the two runs exchanged.
SWAPPED = {"right_to_wrong": "wrong_to_right", "wrong_to_right": "right_to_wrong",
           "worse": "better", "better": "worse"}
CHANGES = {"outcome": ("right_to_wrong", "wrong_to_right"), "nll": ("worse", "better")}


@dataclass(frozen=True)
class FlipItem:
    """One changed question or block: its label, the change, both scores and B - A."""

    key: Any
    label: str
    change: str
    a: float
    b: float
    span: tuple[int, int, int] | None = None   # a perplexity block: (text, first, last window)

    @property
    def delta(self) -> float:
        return self.b - self.a


@dataclass(frozen=True)
class Flips:
    """Run B against run A on one metric: counts per kind and every changed item, right→wrong
    (or worse) first, each group in the order `ordered_by` names."""

    metric: str
    kind: str                      # "outcome" (QA) or "nll" (perplexity blocks)
    rule: str                      # what counts as right / the same, in words
    unit: str
    n: int
    counts: dict[str, int]
    items: tuple[FlipItem, ...]
    graded: bool = False
    ordered_by: str = ""
    per: str = ""                  # perplexity: what the NLL is per ("token")

    def of(self, change: str) -> list[FlipItem]:
        return [i for i in self.items if i.change == change]

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        """JSON for the dashboard: at most `limit` items per change."""
        items = [it for ch in CHANGES[self.kind] for it in self.of(ch)[:limit]]
        return {"metric": self.metric, "kind": self.kind, "rule": self.rule,
                "unit": self.unit, "n": self.n, "counts": dict(self.counts),
                "graded": self.graded, "ordered_by": self.ordered_by, "per": self.per,
                "items": [{"label": it.label, "change": it.change, "a": it.a, "b": it.b}
                          for it in items]}


def swap(f: Flips) -> Flips:
    """The same flips read as A against B (the dashboard stores one order per pair)."""
    counts = {SWAPPED.get(k, k): v for k, v in f.counts.items()}
    counts = {k: counts[k] for k in (OUTCOME_COUNTS if f.kind == "outcome" else NLL_COUNTS)}
    items = tuple(FlipItem(i.key, i.label, SWAPPED[i.change], i.b, i.a, i.span)
                  for i in f.items)
    order = {ch: n for n, ch in enumerate(CHANGES[f.kind])}
    return Flips(f.metric, f.kind, f.rule, f.unit, f.n, counts,
                 tuple(sorted(items, key=lambda i: order[i.change])), f.graded, f.ordered_by,
                 f.per)


# -- classification (pure) --------------------------------------------------------------
def is_binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def outcome_flips(keys: Sequence[Any], labels: Sequence[str], a: Sequence[float],
                  b: Sequence[float], metric: str, unit: str = "questions") -> Flips:
    """Right/wrong per question for a per-question score in [0, 1] (A and B aligned on keys).
    A 0/1 score is right at 1; a graded one above GRADED_RIGHT_ABOVE, its flips then listed
    by the size of the change (largest first), a 0/1 score's in the records' order."""
    values = [*a, *b]
    bad = [v for v in values if not (0.0 <= v <= 1.0)]
    if bad:
        raise ConfigError(f"--metric {metric}: per-sample values such as {bad[0]:g} lie "
                          f"outside [0, 1], so there is no right or wrong; give a QA metric "
                          f"(em, f1_squad, accuracy, ...) or a perplexity (ppl_token).")
    graded = not is_binary(values)
    rule = (f"right = {metric} > {GRADED_RIGHT_ABOVE:g} (graded score)" if graded
            else f"right = {metric} 1 (0/1 score)")
    counts = dict.fromkeys(OUTCOME_COUNTS, 0)
    items: list[tuple[int, FlipItem]] = []
    for pos, (k, lab, x, y) in enumerate(zip(keys, labels, a, b)):
        ra, rb = (x > GRADED_RIGHT_ABOVE, y > GRADED_RIGHT_ABOVE) if graded else (x == 1.0,
                                                                                  y == 1.0)
        kind = ("both_right" if ra and rb else "both_wrong" if not (ra or rb)
                else "right_to_wrong" if ra else "wrong_to_right")
        counts[kind] += 1
        if kind in CHANGES["outcome"]:
            items.append((pos, FlipItem(k, lab, kind, float(x), float(y))))
    order = {ch: n for n, ch in enumerate(CHANGES["outcome"])}
    items.sort(key=lambda t: (order[t[1].change], -abs(t[1].delta) if graded else 0, t[0]))
    return Flips(metric, "outcome", rule, unit, len(keys), counts,
                 tuple(i for _, i in items), graded,
                 "largest change first" if graded else "record order")


def same_within_noise(x: float, y: float) -> bool:
    """Equal up to float reduction noise: TIE_RTOL of the larger value (ragrepro.stats)."""
    return abs(x - y) <= TIE_RTOL * max(abs(x), abs(y), 1e-12)


def nll_flips(keys: Sequence[Any], spans: Sequence[tuple[int, int, int] | None],
              a: Sequence[float], b: Sequence[float], metric: str, per: str,
              unit: str) -> Flips:
    """Better / worse / same per block from its NLL per token (lower is better); the worse
    blocks listed by largest increase first, then the better ones by largest decrease.
    `spans`: each block's (text, first window, last window)."""
    counts = dict.fromkeys(NLL_COUNTS, 0)
    items = []
    for k, span, x, y in zip(keys, spans, a, b):
        kind = "same" if same_within_noise(x, y) else "worse" if y > x else "better"
        counts[kind] += 1
        if kind != "same":
            items.append(FlipItem(k, block_label(k, span), kind, float(x), float(y), span))
    items.sort(key=lambda i: (i.change != "worse", -abs(i.delta)))
    rule = (f"NLL per {per}, lower is better; the same within {TIE_RTOL:g} of the larger "
            f"value (float noise)")
    return Flips(metric, "nll", rule, unit, len(keys), counts, tuple(items), False,
                 "largest change first", per)


# -- reading two runs ----------------------------------------------------------------------
def block_label(key: Any, span: tuple[int, int, int] | None) -> str:
    """'text 0 windows 9-16' for the block keyed (0, 9) that ends at window 16."""
    if span is None:
        return str(key)
    text, first, last = span
    return f"text {text} window {first}" if first == last else \
        f"text {text} windows {first}-{last}"


def block_windows(records: Sequence[Mapping[str, Any]],
                  keys: Sequence[Any]) -> dict[Any, list[Mapping[str, Any]]]:
    """Block key (text, first window) -> its window records in window order: every window of
    that text from the first up to the next block's first (ragrepro.stats.window_blocks'
    grouping, so `keys` must be all the run's block keys). One pass over the records."""
    starts: dict[int, list[int]] = {}
    for k in keys:
        if isinstance(k, tuple) and len(k) == 2:
            starts.setdefault(int(k[0]), []).append(int(k[1]))
    for firsts in starts.values():
        firsts.sort()
    out: dict[Any, list[Mapping[str, Any]]] = {k: [] for k in keys}
    for rec in records:
        if "nll_sum" not in rec or "window" not in rec:
            continue
        text, w = int(rec["text"]), int(rec["window"])
        firsts = starts.get(text, [])
        at = bisect_right(firsts, w) - 1
        if at >= 0:
            out[(text, firsts[at])].append(rec)
    for recs in out.values():
        recs.sort(key=lambda r: int(r["window"]))
    return out


def block_span(key: Any, windows: Sequence[Mapping[str, Any]]) -> tuple[int, int, int] | None:
    """(text, first window, last window) of a block, None when it has no window records."""
    if not windows:
        return None
    return int(key[0]), int(key[1]), int(windows[-1]["window"])


def block_nll(windows: Sequence[Mapping[str, Any]]) -> float:
    """A block's NLL per scored token: its windows' summed nll_sum over summed n_scored."""
    tokens = sum(float(w["n_scored"]) for w in windows)
    return sum(float(w["nll_sum"]) for w in windows) / tokens if tokens > 0 else float("nan")


def _units(run: RunRecord, metric: str, st: StatsSettings) -> Units | None:
    return units_for(run.dir, run.metrics or {}, metric, st.block_tokens)


def candidate_metrics(cfg: ViewConfig | None = None) -> list[str]:
    """Which metric a flip listing uses when none is given, first usable wins: the per-sample
    score `ragrepro samples --wrong` reads (conf/report/samples.yaml `score`), then the
    perplexities (token level first: the NLL per token), then the headline metrics."""
    cfg = cfg or load_view_config()
    infos = metric_infos()
    windows = sorted((n for n, i in infos.items() if i.resample == "windows"),
                     key=lambda n: infos[n].count != "n_tokens")
    heads = [n for n, i in infos.items() if i.headline]
    return list(dict.fromkeys([*cfg.fields["score"], *windows, *heads]))


def choose_metric(a: RunRecord, b: RunRecord, st: StatsSettings = DEFAULT_STATS) -> str | None:
    """The first candidate metric both runs record with per-sample records behind it."""
    both = set(a.metrics or {}) & set(b.metrics or {})
    for name in candidate_metrics():
        if name in both and _units(a, name, st) is not None and _units(b, name, st) is not None:
            return name
    return None


def pair_flips(a: RunRecord, b: RunRecord, metric: str | None = None,
               st: StatsSettings = DEFAULT_STATS) -> tuple[Flips | None, str]:
    """(flips of run B against run A, '') or (None, why there are none)."""
    if metric is None:
        metric = choose_metric(a, b, st)
        if metric is None:
            return None, "no metric with per-sample records in both runs"
    ua, ub = _units(a, metric, st), _units(b, metric, st)
    if ua is None or ub is None:
        return None, f"no per-sample records reproducing {metric} in both runs"
    if set(ua.keys) != set(ub.keys):
        return None, (f"not paired: the runs scored different examples ({ua.n} vs {ub.n} "
                      f"{ua.unit})")
    keys = list(ua.keys)
    if metric_info(metric).resample == "windows":
        # NLL per scored token from the windows themselves: the units' counts spread the
        # run's n_tokens (or n_words) over blocks, a per-run factor that is not per token
        wa = block_windows(read_records(Path(str(a.dir)) / "samples.jsonl"), keys)
        wb = block_windows(read_records(Path(str(b.dir)) / "samples.jsonl"), keys)
        return nll_flips(keys, [block_span(k, wa[k]) for k in keys],
                         [block_nll(wa[k]) for k in keys], [block_nll(wb[k]) for k in keys],
                         metric, "token", ua.unit), ""
    pos = {k: i for i, k in enumerate(ub.keys)}
    va = [float(ua.values[i] / ua.counts[i]) for i in range(ua.n)]
    vb = [float(ub.values[pos[k]] / ub.counts[pos[k]]) for k in keys]
    if not metric_info(metric).higher_is_better:
        raise ConfigError(f"--metric {metric}: lower is better for it, so a high score is not "
                          f"'right'; give a QA metric (em, f1_squad, ...) or a perplexity.")
    return outcome_flips(keys, [str(k) for k in keys], va, vb, metric, ua.unit), ""


# -- what to show of each item ---------------------------------------------------------------
def trim(value: Any, limit: int) -> str:
    """One line of at most `limit` characters: newlines as ⏎, lists joined by ' | '."""
    if value is None:
        return ""
    text = one_line(value)
    return text if len(text) <= limit else text[:max(limit - 1, 0)] + "…"


def _finish_text(record: Mapping[str, Any], cfg: ViewConfig) -> str:
    return ", ".join(f"{s}={r}" if s and len(record.get("generation") or {}) > 1 else r
                     for s, r in finishes(record, cfg).items())


def qa_texts(record: Mapping[str, Any], cfg: ViewConfig, limit: int) -> dict[str, str]:
    """question, gold, output (the parsed answer, else the raw output), finish reason."""
    f = cfg.fields
    output = pick(record, f["answer"])
    if output is None and any(n in record for n in f["answer"]):
        output = "(empty)"
    if output is None:
        output = pick(record, f["output"], text_only=True)
    return {"question": trim(pick(record, f["question"]), limit),
            "gold": trim(pick(record, f["gold"]), limit),
            "output": trim(output, limit), "finish": _finish_text(record, cfg)}


def window_texts(windows: Sequence[Mapping[str, Any]], limit: int) -> list[dict[str, str]]:
    """Per window of a block: its query and the document it read (title and passage id)."""
    out = []
    for w in windows:
        doc = (f"{w.get('doc_title')} [{w.get('doc_pid')}]" if w.get("doc_pid") is not None
               or w.get("doc_title") is not None else "(no document)")
        out.append({"window": str(w.get("window")), "query": trim(w.get("query"), limit),
                    "doc": trim(doc, limit)})
    return out


def item_texts(run: RunRecord, flips: Flips, items: Sequence[FlipItem], limit: int = 60,
               cfg: ViewConfig | None = None) -> dict[str, Any]:
    """label -> what run `run` shows for each item: QA {question, gold, output, finish};
    a perplexity block, the list of its windows' {window, query, doc}."""
    cfg = cfg or load_view_config()
    records = read_records(Path(run.dir) / "samples.jsonl") if run.dir else []
    if flips.kind == "nll":
        # the block starts of every listed item and of the blocks between them: items are
        # keyed by first window, and a block ends where its span says
        windows = block_windows(records, [i.key for i in items])
        return {i.label: window_texts([w for w in windows[i.key] if i.span is None
                                       or int(w["window"]) <= i.span[2]], limit)
                for i in items}
    by_key = {record_key(r, n): r for n, r in enumerate(records)}
    return {i.label: qa_texts(by_key.get(i.key, {}), cfg, limit) for i in items}


def counts_text(f: Flips) -> str:
    names = OUTCOME_COUNTS if f.kind == "outcome" else NLL_COUNTS
    return ", ".join(f"{LABELS[k]} {f.counts[k]}" for k in names)


def fmt_score(x: float, kind: str) -> str:
    return f"{x:.4f}" if kind == "nll" else f"{x:g}"
