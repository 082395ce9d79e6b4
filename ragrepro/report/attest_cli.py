"""`ragrepro attest <experiment> [--run PREFIX ...] [--check FILE_OR_STRING]`: each finished
run's attestation (ragrepro.attest: the hash of its per-sample outputs), read through the
report's one run reader (local folders, else the committed evidence bundle), and a check of
them against another machine's output."""
from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import evidence_manifest
from ..attest import ATTESTATION, ATTESTATION_LENGTH, Attested, of_run
from ..errors import ConfigError, did_you_mean
from ..paths import results_dir
from .keyed import varying
from .runs import experiment_runs, load_runs

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Line:
    """One run's line of `ragrepro attest`."""

    run_id: str
    attested: Attested
    summary: str

    def text(self) -> str:
        return f"{self.run_id}  {self.attested.shown()}  {self.summary}".rstrip()


def parse_expected(text: str) -> dict[str, str]:
    """run id -> attestation from the text of an earlier `ragrepro attest` (first two fields
    of each line; `#` lines and blank ones skipped; `experiment/run_id` read as run_id)."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) < 2 or not ATTESTATION.match(fields[1]):
            raise ConfigError(f"line {n} of the --check file is not `run_id  attestation  "
                              f"...` (as `ragrepro attest` prints it): {raw.strip()[:80]!r}.")
        out[fields[0].rsplit("/", 1)[-1]] = fields[1]
    return out


def check_lines(lines: Sequence[Line], expected: Mapping[str, str] | str,
                selected_only: bool) -> tuple[list[str], bool]:
    """(report lines, all same) of the runs against an attestation string (each run) or a
    file's run id -> attestation; with a file, its runs missing here count unless the
    selection was narrowed (`selected_only`)."""
    out, same = [], True
    for line in lines:
        mine = line.attested.value
        theirs = expected if isinstance(expected, str) else expected.get(line.run_id)
        if theirs is None:
            out.append(f"{line.run_id}  {line.attested.shown()}  not in the --check file")
            same = False
        elif mine == theirs:
            out.append(f"{line.run_id}  {mine}  same")
        else:
            out.append(f"{line.run_id}  {line.attested.shown()}  DIFFERS (expected {theirs})")
            same = False
    if isinstance(expected, Mapping) and not selected_only:
        here = {line.run_id for line in lines}
        for run_id in sorted(set(expected) - here):
            out.append(f"{run_id}  -  missing here (expected {expected[run_id]})")
            same = False
    return out, same


def expected_of(check: str) -> dict[str, str] | str:
    """--check: an attestation string, or a file holding `ragrepro attest` output."""
    path = Path(check)
    if path.is_file():
        return parse_expected(path.read_text(encoding="utf-8"))
    if ATTESTATION.match(check):
        return check
    raise ConfigError(f"--check {check!r}: neither a file nor an attestation ({ATTESTATION_LENGTH} "
                      f"lower-case hex characters, as `ragrepro attest` prints them).")


def _summary(settings: Mapping[str, Any], keys: Sequence[str]) -> str:
    return " ".join(f"{k}={settings.get(k)}" for k in keys if k in settings)


def telling_apart(settings: Sequence[Mapping[str, Any]], candidates: Sequence[str],
                  first: Sequence[str] = ("model",)) -> list[str]:
    """`first`, then greedily the candidate setting that tells the most runs apart, until
    every run is told apart or no setting adds any: a short line per run, not every setting
    that varies (a resolved revision varies with the model and adds nothing)."""
    def distinct(keys: Sequence[str]) -> int:
        return len({tuple(json.dumps(s.get(k), sort_keys=True, default=str) for k in keys)
                    for s in settings})

    keys = [k for k in first if any(k in s for s in settings)]
    rest = [k for k in candidates if k not in keys]
    while rest and distinct(keys) < len(settings):
        best = max(rest, key=lambda k: distinct([*keys, k]))  # ties: the earlier one
        if distinct([*keys, best]) == distinct(keys):
            break
        keys.append(best)
        rest.remove(best)
    return keys


def finished_runs(root: Path, experiment: str, prefixes: Sequence[str]) -> list[Any]:
    """The experiment's finished runs (report.runs.RunRecord, read through the report's one
    reader: local folders, else the committed evidence bundle) whose id starts with one of
    `prefixes` (all without any); none is refused with a did-you-mean."""
    runs = [r for r in experiment_runs(root, experiment) if r.dir is not None]
    if not runs:
        known = sorted({r.experiment for r in load_runs(root)})
        raise ConfigError(f"No finished run of experiment {experiment!r} under {root}."
                          f"{did_you_mean(experiment, known)} Experiments with runs: "
                          f"{', '.join(known) or '(none)'}."
                          f"{evidence_manifest.pending_note(root, experiment)}")
    return select_prefixes(runs, prefixes, experiment)


def attest_lines(root: Path, experiment: str, prefixes: Sequence[str]) -> list[Line]:
    """One line per finished run of the experiment (those whose id starts with one of
    `prefixes`, when given)."""
    runs = finished_runs(root, experiment, prefixes)
    settings = [r.settings for r in runs]
    keys = telling_apart(settings, varying(settings) if len(runs) > 1 else [])
    return [Line(r.run_id, of_run(r.dir, r.metrics_json), _summary(r.settings, keys))
            for r in runs]


def select_prefixes(runs: Sequence[Any], prefixes: Sequence[str], experiment: str) -> list[Any]:
    """The runs whose id starts with one of `prefixes` (all without any); a prefix that
    matches no run is refused with the run ids there are."""
    if not prefixes:
        return list(runs)
    for p in prefixes:
        if not any(r.run_id.startswith(p) for r in runs):
            ids = ", ".join(r.run_id for r in runs[:12])
            raise ConfigError(f"--run {p}: no run of {experiment} has an id starting so; its "
                              f"runs: {ids}{' ...' if len(runs) > 12 else ''}.")
    return [r for r in runs if any(r.run_id.startswith(p) for p in prefixes)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="ragrepro attest",
        description="Print each finished run's attestation: an order-independent hash of its "
                    "per-sample outputs (samples.jsonl), one string two machines can compare.",
        epilog="Output: `run_id  attestation  settings`. Save it on one machine and give the "
               "file to --check on the other; or give one attestation string to --check. "
               "Exit 0: printed, or every checked run the same; 1: a run differs or is "
               "missing; 2: a usage error.")
    ap.add_argument("experiment", help="experiment name, e.g. ralm/table1")
    ap.add_argument("--run", action="append", default=[], metavar="RUN_ID_PREFIX",
                    help="only runs whose id starts so (repeatable)")
    ap.add_argument("--check", default=None, metavar="FILE_OR_STRING",
                    help="compare with an earlier `ragrepro attest` output file, or with one "
                         "attestation string")
    ap.add_argument("--results", "--results-dir", dest="results", type=Path, default=None,
                    metavar="DIR",
                    help="results folder (default results/)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    expected = expected_of(args.check) if args.check else None  # bad --check: exit 2 first
    lines = attest_lines(args.results or results_dir(), args.experiment, args.run)
    status = 0
    for line in lines:
        if line.attested.mismatch:
            log.error("%s/%s: its samples.jsonl hashes to %s, but the run recorded %s: the "
                      "samples were changed after the run finished. Rerun it (overwrite=true).",
                      args.experiment, line.run_id, line.attested.computed,
                      line.attested.recorded)
            status = 1
    if expected is None:
        computed = sum(x.attested.recorded is None and x.attested.computed is not None
                       for x in lines)
        note = (f" ({computed} computed here from samples.jsonl: runs finished before runs "
                f"recorded one)" if computed else "")
        sys.stdout.write(f"# {args.experiment}: run_id  attestation  settings{note}\n"
                         + "".join(x.text() + "\n" for x in lines))
        return status
    report, same = check_lines(lines, expected, selected_only=bool(args.run))
    sys.stdout.write("".join(x + "\n" for x in report))
    return 0 if same and not status else 1
