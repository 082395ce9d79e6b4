"""Rescoring: metrics recomputed from a finished run's saved samples into a new run that
records where it came from. No model, tokenizer or dataset loads: a new metric or another
answer normalisation costs seconds, not a rerun.

    ragrepro rescore <experiment> --metric NAME [--metric NAME ...] [--normalization NORM]
                     [--run RUN_ID_PREFIX ...] [--into EXPERIMENT] [--overwrite]

Each chosen run of <experiment> gives one new run of the `--into` experiment (default
`rescored/<experiment>`: its own folder and CSV beside the others, never mixed into the runs
it came from). Its id hashes the source run (experiment, run id, attestation) and the
rescoring spec, so a rerun of the same command skips what it finished, and a source whose
outputs changed gets a new id. Its metrics.json holds

    rescored_from: {experiment, run_id, attestation}    the source run and its outputs' hash
    rescore: {metrics, normalization, columns}           what was recomputed, under which names

and its row carries the source's settings plus `rescore_metrics` and `rescore_normalization`
(the same for every run of one command, so a table still pairs each run with its baseline)
and, from the metadata, `rescored_from` (`experiment/run_id`) and its own `attestation`:
`ragrepro table`, `compare` and `samples` read it like any run.
Its samples.jsonl is the source's, each record with its rescored per-sample values added.

What each metric reads from a sample (a record lacking the field is refused, naming it):

  em_squad, em_filco_code, f1_squad,   `prediction` and `answers` (RALM QA, RICHES, FilCo)
  f1_char_filco_code, accuracy
  has_answer                           `prompt` and `answers`: RALM QA scores whether a gold
                                       answer is in its prompt (its retrieval recall)
  ppl_token, ppl_word                  the windows' `nll_sum` (RALM perplexity), over the
                                       run's recorded `n_tokens` / `n_words` (metrics.json):
                                       the words were counted from the texts, which the
                                       samples do not hold, so another word-count rule needs
                                       a rerun

`--normalization` recomputes the answer metrics under another normalisation (NORMALIZATIONS);
the column is then named `<family>_<normalization>` (em_squad under filco_code: em_filco_code,
f1_squad under filco_code: f1_filco_code, a token F1 no pipeline computes). Without it, or with
a metric's own normalisation, the registry's function (ragrepro.metrics) scores each sample,
so rescoring reproduces what the run recorded.
"""
from __future__ import annotations

import argparse
import json
import logging
import string
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import attest, runlock
from .errors import ConfigError, DataError, did_you_mean
from .hashing import hash_obj
from .io import atomic_write_text
from .metrics.qa import f1_from_bags, normalize_squad
from .metrics.registry import AnswerForm, computable, get_metric, metric_table
from .paths import results_dir
from .report.attest_cli import finished_runs
from .run_files import read_metrics, read_records
from .tracking import Run

log = logging.getLogger(__name__)

SAMPLES_FILE = "samples.jsonl"
DEFAULT_INTO = "rescored/{experiment}"


# -- normalisations and answer metrics (pure) ---------------------------------------------
def _lowercase(text: str) -> str:
    """Lower case, whitespace collapsed; punctuation and articles kept."""
    return " ".join(text.lower().split())


def _whitespace(text: str) -> str:
    """Whitespace collapsed and stripped only: case, punctuation and articles count."""
    return " ".join(text.split())


def _squad_keep_articles(text: str) -> str:
    """SQuAD's without dropping articles: lower case, punctuation removed, whitespace."""
    return " ".join("".join(ch for ch in text.lower() if ch not in string.punctuation).split())


class _Registered(Mapping):
    """A read-only mapping computed from the metric registry on each use: a method's metrics
    (and their normalisations) are registered through its profile, after this module loads."""

    def __init__(self, build: Callable[[], Mapping[str, Any]]):
        self._build = build

    def __getitem__(self, key: str) -> Any:
        return self._build()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._build())

    def __len__(self) -> int:
        return len(self._build())


# The core's normalisations; a registered answer metric adds its own (`rescore.native`, e.g.
# FilCo's `filco_code`: lower, no articles, punctuation kept).
CORE_NORMALIZATIONS: dict[str, Callable[[str], str]] = {
    "squad": normalize_squad,              # lower, no punctuation, no a/an/the (SQuAD, RALM)
    "squad_keep_articles": _squad_keep_articles,  # SQuAD's, a/an/the kept
    "lowercase": _lowercase,
    "whitespace": _whitespace,
}


def answer_metrics() -> dict[str, AnswerForm]:
    """The registered metrics rescoring recomputes from `prediction`/`prompt` and `answers`."""
    return {n: m.rescore for n, m in metric_table().items() if m.rescore is not None}


def normalizations() -> dict[str, Callable[[str], str]]:
    """The core's normalisations, then the registered answer metrics' own."""
    out = dict(CORE_NORMALIZATIONS)
    for form in answer_metrics().values():
        out.setdefault(form.native, form.normalize)
    return out


NORMALIZATIONS: Mapping[str, Callable[[str], str]] = _Registered(normalizations)


def em_with(norm: Callable[[str], str]) -> Callable[[str, Sequence[str]], float]:
    """Exact match of the normalised prediction with any normalised gold answer."""
    def em(prediction: str, answers: Sequence[str]) -> float:
        p = norm(prediction)
        return float(any(p == norm(a) for a in answers))
    return em


def token_f1_with(norm: Callable[[str], str]) -> Callable[[str, Sequence[str]], float]:
    """Token-bag F1 of the normalised strings, max over gold answers (both empty: 1)."""
    def f1(prediction: str, answers: Sequence[str]) -> float:
        def one(answer: str) -> float:
            pred, gold = norm(prediction).split(), norm(answer).split()
            return 1.0 if not pred and not gold else f1_from_bags(pred, gold)
        return max((one(a) for a in answers), default=0.0)
    return f1


def char_f1_with(norm: Callable[[str], str]) -> Callable[[str, Sequence[str]], float]:
    """Character-bag F1 of the normalised strings (FilCo eval.py's), max over gold answers."""
    def f1(prediction: str, answers: Sequence[str]) -> float:
        return max((f1_from_bags(list(norm(prediction)), list(norm(a))) for a in answers),
                   default=0.0)
    return f1


def has_answer_with(norm: Callable[[str], str]) -> Callable[[str, Sequence[str]], float]:
    """Some non-empty normalised gold answer is a substring of the normalised text."""
    def has(text: str, answers: Sequence[str]) -> float:
        t = norm(text)
        return float(any(norm(a) and norm(a) in t for a in answers))
    return has


FAMILIES: dict[str, Callable[[Callable[[str], str]], Callable[[str, Sequence[str]], float]]] = {
    "em": em_with, "f1": token_f1_with, "f1_char": char_f1_with, "accuracy": em_with,
    "has_answer": has_answer_with}
# metric -> how rescoring recomputes it (ragrepro.metrics.registry.AnswerForm)
ANSWER_METRICS: Mapping[str, AnswerForm] = _Registered(answer_metrics)
# metric -> the metrics.json count it divides the summed NLL by (ralm.lm_eval.aggregate)
PERPLEXITY_COUNTS: dict[str, str] = {"ppl_token": "n_tokens", "ppl_word": "n_words"}
GOLD_FIELD = "answers"
NLL_FIELDS = ("nll_sum", "n_scored")
# Registry metrics whose inputs no sample holds as such: named in the refusal.
NOT_RESCORABLE: dict[str, str] = {
    "unigram_precision": "it compares a text with a reference the pipelines score before "
                         "saving (FilCo's context_precision), not a saved prediction",
    "recall_at_k": "its cut at k happens before the retrieved titles are saved",
    "autoais": "it needs the attribution judge, a model: `ragrepro judge <experiment> "
               "force=true` scores a run again",
}


def rescorable() -> list[str]:
    return sorted([*ANSWER_METRICS, *PERPLEXITY_COUNTS])


@dataclass(frozen=True)
class Spec:
    """What a rescoring computes: registry metric names (sorted, once each) and the
    normalisation of the answer metrics (None: each metric's own)."""

    metrics: tuple[str, ...]
    normalization: str | None = None

    @classmethod
    def of(cls, metrics: Sequence[str], normalization: str | None) -> Spec:
        if not metrics:
            raise ConfigError(f"ragrepro rescore: give at least one --metric; rescorable: "
                              f"{', '.join(rescorable())}.")
        for name in metrics:
            check_metric(name)
        if normalization is not None and normalization not in NORMALIZATIONS:
            raise ConfigError(f"--normalization {normalization!r} is not one of "
                              f"{', '.join(NORMALIZATIONS)}."
                              f"{did_you_mean(normalization, NORMALIZATIONS)}")
        if normalization is not None:
            plain = [m for m in metrics if m not in ANSWER_METRICS]
            if plain:
                raise ConfigError(f"--normalization applies to answer metrics "
                                  f"({', '.join(ANSWER_METRICS)}); {', '.join(plain)} has "
                                  f"none: rescore it in a command without --normalization.")
        return cls(tuple(sorted(set(metrics))), normalization)

    def column(self, metric: str) -> str:
        """The metric's column: its own name, or `<family>_<normalization>` under another
        normalisation than its registry function's."""
        info = ANSWER_METRICS.get(metric)
        if info is None or self.normalization in (None, info.native):
            return metric
        return f"{info.family}_{self.normalization}"

    def as_dict(self) -> dict[str, Any]:
        # columns as a list in the order of metrics: a mapping keyed `ppl_token` would be
        # redacted in config.json by tracking.scrub_secrets (a credential-like `_token` key)
        return {"metrics": list(self.metrics), "normalization": self.normalization,
                "columns": [self.column(m) for m in self.metrics]}


def check_metric(name: str) -> None:
    """Refuse a name rescoring cannot compute: unknown (with a did-you-mean over the
    registry), or registered but not computable from saved samples (why)."""
    if name in ANSWER_METRICS or name in PERPLEXITY_COUNTS:
        return
    if name in NOT_RESCORABLE:
        raise ConfigError(f"--metric {name}: cannot be recomputed from saved samples "
                          f"({NOT_RESCORABLE[name]}). Rescorable: {', '.join(rescorable())}.")
    known = sorted({*computable(), *rescorable()})
    raise ConfigError(f"--metric {name!r}: unknown metric.{did_you_mean(name, known)} "
                      f"Rescorable: {', '.join(rescorable())}.")


# -- scoring one run's records (pure) -----------------------------------------------------
@dataclass(frozen=True)
class Source:
    """A finished run to rescore: where it is and what it recorded."""

    experiment: str
    run_id: str
    dir: Path
    metrics: Mapping[str, Any]
    settings: Mapping[str, Any]
    config: Mapping[str, Any]
    attestation: str | None

    @property
    def name(self) -> str:
        return f"{self.experiment}/{self.run_id}"


def _lacking(records: Sequence[Mapping[str, Any]], field: str, kind: type | tuple) -> int | None:
    """The line (1-based) of the first record whose `field` is absent or not of `kind`."""
    for i, r in enumerate(records, start=1):
        if not isinstance(r.get(field), kind) or isinstance(r.get(field), bool):
            return i
    return None


def _need(source: Source, records: Sequence[Mapping[str, Any]], field: str, kind: type | tuple,
          metric: str) -> None:
    line = _lacking(records, field, kind)
    if line is not None:
        what = "no records" if not records else f"record {line} has no {kind_name(kind)} `{field}`"
        raise DataError(f"--metric {metric} needs the per-sample field `{field}`, which "
                        f"{source.name} does not save ({source.dir / SAMPLES_FILE}: {what}). "
                        f"Rescore it with a metric its samples hold, or rerun it.")


def kind_name(kind: type | tuple) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({str: "text", list: "list", int: "number", float: "number"}[k]
                       for k in kinds)


def answer_scores(spec: Spec, metric: str, records: Sequence[Mapping[str, Any]]) -> list[float]:
    """One value per record of an answer metric under the spec's normalisation."""
    info = ANSWER_METRICS[metric]
    if spec.normalization in (None, info.native):
        fn = get_metric(metric).fn  # the registry's own: reproduces the run's numbers
    else:
        fn = FAMILIES[info.family](NORMALIZATIONS[spec.normalization])
    return [float(fn(r[info.text_field], list(r[GOLD_FIELD]))) for r in records]


def window_order(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Perplexity windows in the pipeline's summing order (stream, then window): the NLL
    sum is then the pipeline's to the last bit, whatever order the file holds them in."""
    return sorted(records, key=lambda r: (int(r.get("text", 0)), int(r.get("window", 0))))


def perplexity_metrics(metrics: Sequence[str], windows: Sequence[Mapping[str, Any]],
                       counts: Mapping[str, Any]) -> dict[str, Any]:
    """nll_sum, scored tokens, windows and each ppl over its recorded count (registry
    aggregation, as ralm.lm_eval.aggregate computes them)."""
    ordered = window_order(windows)
    nll = float(sum(r["nll_sum"] for r in ordered))
    out: dict[str, Any] = {"nll_sum": nll,
                           "n_scored_tokens": int(sum(r["n_scored"] for r in ordered)),
                           "n_windows": len(ordered)}
    for m in metrics:
        count = counts[PERPLEXITY_COUNTS[m]]
        out[PERPLEXITY_COUNTS[m]] = count
        out[m] = get_metric(m).aggregate([(nll, count)])
    return out


def rescore_records(spec: Spec, source: Source, records: Sequence[Mapping[str, Any]]
                    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metrics, per-sample records with the rescored values added) of one source run."""
    answer = [m for m in spec.metrics if m in ANSWER_METRICS]
    ppl = [m for m in spec.metrics if m in PERPLEXITY_COUNTS]
    out_records = [dict(r) for r in records]
    metrics: dict[str, Any] = {}
    for m in answer:
        _need(source, records, ANSWER_METRICS[m].text_field, str, m)
        _need(source, records, GOLD_FIELD, list, m)
        values = answer_scores(spec, m, records)
        column = spec.column(m)
        for rec, v in zip(out_records, values):
            rec[column] = v
        metrics[column] = get_metric(m).aggregate(values)
    if answer:
        metrics["n"] = len(records)
    if ppl:
        for f in NLL_FIELDS:
            _need(source, records, f, (int, float), ppl[0])
        for m in ppl:
            count = source.metrics.get(PERPLEXITY_COUNTS[m])
            if not isinstance(count, int) or isinstance(count, bool) or count <= 0:
                raise DataError(f"--metric {m} needs the count `{PERPLEXITY_COUNTS[m]}` in "
                                f"{source.dir / 'metrics.json'} (metrics), which {source.name} "
                                f"does not record. Rescore it with a metric its run holds, "
                                f"or rerun it.")
        metrics.update(perplexity_metrics(ppl, records, source.metrics))
    return metrics, out_records


def rescored_run_id(source: Source, spec: Spec) -> str:
    """Same source outputs and spec, same id (a rerun skips it); new outputs, a new id."""
    return hash_obj({"rescored_from": {"experiment": source.experiment,
                                       "run_id": source.run_id,
                                       "attestation": source.attestation},
                     "rescore": {"metrics": list(spec.metrics),
                                 "normalization": spec.normalization}})


def rescored_settings(source: Source, spec: Spec) -> dict[str, Any]:
    """The source's settings, so the row is comparable, and what was rescored (the same for
    every run of one command, so the tables still pair a run with its baseline; the source,
    which differs per run, is in the row's `rescored_from` column, from the metadata)."""
    return {**source.settings,
            "rescore_metrics": ",".join(spec.column(m) for m in spec.metrics),
            "rescore_normalization": spec.normalization or "own"}


# -- reading sources, writing runs (I/O) ----------------------------------------------------
def sources(root: Path, experiment: str, prefixes: Sequence[str]) -> list[Source]:
    """The experiment's finished runs (those starting with a prefix, when given), read
    through the report's one reader (local folders, else the committed evidence bundle)."""
    return [Source(r.experiment, r.run_id, Path(r.dir), dict(r.metrics), dict(r.settings),
                   dict(r.config), attest.of_run(r.dir, r.metrics_json).value)
            for r in finished_runs(root, experiment, prefixes)]


@dataclass(frozen=True)
class Outcome:
    source: str
    target: str
    metrics: Mapping[str, Any]
    skipped: str = ""

    def text(self) -> str:
        if self.skipped:
            return f"{self.source} -> {self.target}: {self.skipped}"
        shown = " ".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in self.metrics.items())
        return f"{self.source} -> {self.target}: {shown}"


def rescore_one(root: Path, into: str, source: Source, spec: Spec,
                overwrite: bool = False) -> Outcome:
    """Rescore one source run into a new run of `into` (skipped when finished)."""
    run = Run(into, rescored_run_id(source, spec), root)
    target = f"{into}/{run.run_id}"
    if run.is_finished() and not overwrite:
        return Outcome(source.name, target, read_metrics(run.final_dir / "metrics.json")["metrics"],
                       "finished earlier: skipped (--overwrite recomputes it)")
    records = read_records(source.dir / SAMPLES_FILE, finished=True)
    with runlock.writing(run, runlock.WriterSettings()) as writer:
        if writer is None:
            return Outcome(source.name, target, {}, "being written by another process: skipped")
        from .metadata import git_state  # deferred: imports torch; only when a run is written

        code = dict(git_state())
        started = time.time()
        run.start(overwrite=True, code=code)  # a leftover tmp_ of a killed rescoring: redone
        with run.timed("rescore"):
            metrics, out_records = rescore_records(spec, source, records)
            atomic_write_text(run.samples_path, "".join(
                _json_line(r) for r in out_records))
        origin = {"experiment": source.experiment, "run_id": source.run_id,
                  "attestation": source.attestation}
        config = {**source.config, "name": into, "rescore": spec.as_dict(),
                  "rescored_from": origin}
        metadata = {**code, "started_at": started, "rescored_from": source.name}
        run.write_results(config, metrics, rescored_settings(source, spec), metadata,
                          record={"rescored_from": origin, "rescore": spec.as_dict()})
        writer.check_held()
        run.commit()
    return Outcome(source.name, target, metrics)


def _json_line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, ensure_ascii=False, default=float) + "\n"


def rescore(root: Path, experiment: str, spec: Spec, prefixes: Sequence[str] = (),
            into: str | None = None, overwrite: bool = False) -> list[Outcome]:
    """Rescore the chosen runs of `experiment` into `into` (default rescored/<experiment>)."""
    into = into or DEFAULT_INTO.format(experiment=experiment)
    if into.strip("/") == experiment.strip("/"):
        raise ConfigError(f"--into {into}: rescored runs go to another experiment than the "
                          f"runs they come from (default {DEFAULT_INTO.format(experiment=experiment)}"
                          f"), so a table of {experiment} never mixes the two.")
    chosen = sources(root, experiment, prefixes)
    # every source is checked before any run is written: a refusal writes nothing
    for src in chosen:
        rescore_records(spec, src, read_records(src.dir / SAMPLES_FILE, finished=True))
    return [rescore_one(root, into, src, spec, overwrite) for src in chosen]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="ragrepro rescore",
        description="Recompute metrics from finished runs' saved samples (no model loads) "
                    "into new runs that record the run each came from.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Rescorable metrics: " + ", ".join(rescorable()) + ".\n"
               "Normalisations (answer metrics): " + ", ".join(NORMALIZATIONS) + ".\n"
               "Under another normalisation than its own a metric's column is "
               "<family>_<normalization>\n(em_squad --normalization filco_code -> "
               "em_filco_code; f1_squad -> f1_filco_code).\n"
               "Example: ragrepro rescore ralm/fig8 --metric em_squad --metric f1_squad "
               "--normalization lowercase\n"
               "Each new run's id hashes its source run and the spec: a rerun skips what it "
               "finished.\nSee docs/report.md, \"Rescoring\".")
    ap.add_argument("experiment", help="the experiment whose runs are rescored, e.g. ralm/fig8")
    ap.add_argument("--metric", action="append", default=[], metavar="NAME", required=True,
                    help="a metric to recompute (repeatable)")
    ap.add_argument("--normalization", default=None, metavar="NORM",
                    help="answer normalisation for the answer metrics (default: each "
                         "metric's own)")
    ap.add_argument("--run", action="append", default=[], metavar="RUN_ID_PREFIX",
                    help="only runs whose id starts so (repeatable; default: every run)")
    ap.add_argument("--into", default=None, metavar="EXPERIMENT",
                    help="the experiment the new runs go to (default rescored/<experiment>)")
    ap.add_argument("--overwrite", action="store_true",
                    help="recompute rescored runs that finished earlier")
    ap.add_argument("--results", "--results-dir", dest="results", type=Path, default=None,
                    metavar="DIR",
                    help="results folder (default results/)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    spec = Spec.of(args.metric, args.normalization)  # bad names: exit 2 before any read
    outcomes = rescore(args.results or results_dir(), args.experiment, spec, args.run,
                       args.into, args.overwrite)
    sys.stdout.write("".join(o.text() + "\n" for o in outcomes))
    return 0
