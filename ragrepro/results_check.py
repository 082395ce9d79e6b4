"""An experiment's results checked against themselves: the CSV index against the run folders,
and every run file for damage (docs/reliability.md, "Damaged files" and "ragrepro check").

The run folders are the truth; `results/<experiment>.csv` is an index of them that
`tracking.csv_row` rebuilds from each folder's metrics.json. So every CSV problem is
repairable from the folders (`rebuilt_index`): a row that differs, is cut short or carries a
garbage column is rebuilt, a row whose run is gone is dropped, a finished folder without a
row gets it back. A damaged run file is never repaired: the run cannot be trusted, and the
fix is to delete its folder and rerun.

Pure functions compare what was read (`CsvIndex`, `Folder` records): `index_problems`,
`rebuilt_index`. The readers around them (`scan`, `check_experiment`, `repair`,
`validated_rows`) touch the disk; the report's run reader (ragrepro.report.runs) calls
`validated_rows`, the `ragrepro check` command (`main`) the others.
"""
from __future__ import annotations

import argparse
import csv
import io
import logging
import re
import shutil
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import DataError
from .io import atomic_write_text, locked
from .paths import results_dir
from .run_files import (
    csv_damaged,
    read_metrics,
    read_records,
    read_run_json,
)
from .runlock import SUFFIX as WRITER_SUFFIX
from .runlock import WriterSettings
from .tracking import Run, folder_row

log = logging.getLogger(__name__)

# What each kind of problem means; the check prints the kind first on every line.
KINDS: Mapping[str, str] = {
    "damaged_file": "a run file cannot be read: the run cannot be trusted",
    "misplaced_run": "metrics.json names another run or experiment than its folder",
    "samples_short": "samples.jsonl holds fewer records than the run's own count",
    "csv_unreadable": "the CSV holds bytes that are not text",
    "bad_header": "the CSV header is not the runner's",
    "unknown_column": "a CSV column that no run records",
    "field_count": "a CSV row with another number of fields than the header",
    "duplicate_row": "two CSV rows of one run",
    "row_without_run": "a CSV row whose run folder is gone",
    "run_without_row": "a finished run folder missing from the CSV",
    "value_differs": "a CSV value that differs from the run folder's",
    "unfinished_run": "a tmp_ folder: a run that has not finished",
    "replaced_leftover": "a tmp_<run>.replaced folder a commit or overwrite left behind",
    "temp_file": "a temporary file of the atomic writer left behind",
}
# The CSV's problems, all repairable from the folders: (what `--repair` does, what the
# report's reader did when it repaired them on reading).
INDEX_FIXES: Mapping[str, tuple[str, str]] = {
    "csv_unreadable": ("`--repair` rebuilds the CSV from the run folders", ""),
    "bad_header": ("`--repair` rebuilds the CSV from the run folders",
                   "the CSV was rebuilt from the run folders"),
    "unknown_column": ("`--repair` rewrites the CSV without it", "the column was dropped"),
    "field_count": ("`--repair` rebuilds the row from its folder (drops it without one)",
                    "the row was rebuilt from its folder (dropped without one)"),
    "duplicate_row": ("`--repair` keeps one row, rebuilt from the folder",
                      "one row was kept, rebuilt from the folder"),
    "row_without_run": ("`--repair` drops the row", "the row was dropped"),
    "run_without_row": ("`--repair` adds it from its metrics.json",
                        "the row was added from its metrics.json"),
    "value_differs": ("`--repair` rewrites the row from the folder",
                      "the row was rewritten from the folder"),
}
INDEX_KINDS = frozenset(INDEX_FIXES)
# Columns csv_row writes for every run; a CSV without them is not a runner's index.
RUN_COLUMNS = ("run_id", "experiment", "finished_at")
# finished_at is the time the row was written (the file's time when restored): not a value
# of the run, so it is never compared; wall_s comes from metrics.json's timings and is.
UNCOMPARED = frozenset({"finished_at"})
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
# Where a run records how many records its samples.jsonl holds (metrics first, then
# settings): RALM windows, RICHES questions, QA/smoke examples, FilCo evaluated questions.
RECORD_COUNTS = (("metrics", "n_windows"), ("metrics", "n"), ("settings", "n_examples"),
                 ("settings", "n_questions"), ("settings", "n_eval"))
# An atomic write's temporary file lives for milliseconds; one this old was left by a kill.
TEMP_GRACE_S = 600.0


@dataclass(frozen=True)
class Problem:
    """One inconsistency: its kind (KINDS), the file or folder, the run (None for the CSV
    as a whole), what is wrong (naming the file and the fix), and whether `repair` fixes it."""

    kind: str
    path: Path
    run_id: str | None
    detail: str
    repairable: bool

    def line(self) -> str:
        """The check's line: kind, what is wrong, and (for the CSV's problems) the fix."""
        fix = INDEX_FIXES.get(self.kind, ("",))[0]
        return f"{self.kind}: {self.detail}" + (f"; {fix}." if fix else "")

    def repaired(self) -> str:
        """The report reader's warning once it repaired this problem on reading."""
        return f"{self.detail}: {INDEX_FIXES[self.kind][1]}."


@dataclass
class CsvIndex:
    """An experiment's CSV as read: header, rows with their line numbers (fields as text),
    and the first undecodable line, if any (its bytes are replaced, so the rest is read)."""

    path: Path
    exists: bool
    header: list[str] = field(default_factory=list)
    rows: list[tuple[int, list[str]]] = field(default_factory=list)
    unreadable: tuple[int, str] | None = None

    @property
    def is_runner_csv(self) -> bool:
        return set(RUN_COLUMNS) <= set(self.header)


@dataclass
class Folder:
    """A finished run folder: metrics.json's content (None when damaged), its time, and
    what is wrong with its files."""

    run_id: str
    dir: Path
    data: dict[str, Any] | None
    mtime: float
    problems: list[Problem] = field(default_factory=list)
    error: DataError | None = None


@dataclass
class Scan:
    """What an experiment's results hold: the index, its finished folders (by run id), the
    run ids of unfinished (tmp_) folders, and the problems outside the index."""

    root: Path
    experiment: str
    index: CsvIndex
    folders: dict[str, Folder]
    unfinished: set[str]
    other: list[Problem]

    def expected(self) -> dict[str, dict[str, str]]:
        """The row each readable finished folder gives, as text after the CSV round trip."""
        return {rid: expected_row(self.root, self.experiment, f) for rid, f in
                sorted(self.folders.items(), key=lambda kv: (kv[1].mtime, kv[0]))
                if f.data is not None}

    def untrusted(self) -> set[str]:
        return {rid for rid, f in self.folders.items() if f.data is None}


# ---- reading --------------------------------------------------------------------------------
def read_index(path: Path) -> CsvIndex:
    """The CSV with nothing lost: undecodable bytes and NULs are noted and replaced, and a
    row keeps its own number of fields."""
    path = Path(path)
    if not path.exists():
        return CsvIndex(path, exists=False)
    data = path.read_bytes()
    unreadable = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        unreadable = (data[: e.start].count(b"\n") + 1, f"not valid UTF-8 at byte {e.start}")
        text = data.decode("utf-8", errors="replace")
    if "\x00" in text:
        unreadable = unreadable or (text[: text.index("\x00")].count("\n") + 1, "a NUL byte")
        text = text.replace("\x00", "")
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for fields in reader:
            rows.append((start, fields))
            start = reader.line_num + 1
    except csv.Error as e:
        unreadable = unreadable or (reader.line_num, f"unreadable CSV: {e}")
    header = rows.pop(0)[1] if rows else []
    return CsvIndex(path, True, header, [(n, f) for n, f in rows if f], unreadable)


def expected_row(root: Path, experiment: str, folder: Folder) -> dict[str, str]:
    """The row `commit` wrote for this folder, as the CSV holds it (text, None as '');
    finished_at is metrics.json's time (the caller keeps the CSV's own where it has one)."""
    assert folder.data is not None
    # the run's own name: a results folder read from above (results/rehearsal/...) sees
    # its experiments under a longer path than the runner that wrote them
    name = str(folder.data.get("experiment") or experiment)
    row = folder_row(Run(name, folder.run_id, root), folder.data, folder.mtime)
    return as_csv_text(row)


def as_csv_text(row: Mapping[str, Any]) -> dict[str, str]:
    """Row values through the CSV writer and reader, as `append_csv_row` stores them."""
    buf = io.StringIO()
    csv.writer(buf).writerow(["" if v is None else v for v in row.values()])
    fields = next(csv.reader(io.StringIO(buf.getvalue(), newline="")))
    return dict(zip(row.keys(), fields))


def scan(root: Path, experiment: str, deep: bool = False, now: float | None = None,
         drop_unfinished: bool = False) -> Scan:
    """Read an experiment's CSV and run folders. Every finished folder's metrics.json is
    read; `deep` also reads its other files and looks for leftovers (the `check` command)."""
    root = Path(root)
    now = time.time() if now is None else now
    base = root / experiment
    index = read_index(root / f"{experiment}.csv")
    folders: dict[str, Folder] = {}
    unfinished: set[str] = set()
    other: list[Problem] = []
    for d in sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []:
        if d.name.startswith("tmp_") and d.name.endswith(".replaced"):
            other.append(Problem("replaced_leftover", d, d.name[4:-9], (
                f"{d}/ is a finished folder that a newer copy of the run replaced; it is "
                f"no longer used and is removed by `--repair`."), True))
        elif d.name.startswith("tmp_"):
            unfinished.add(d.name[4:])
            if deep:
                other.append(_unfinished(d, base, index, now, drop_unfinished))
        elif (d / "metrics.json").exists() or any((d / n).exists() for n in
                                                  ("config.json", "samples.jsonl")):
            folders[d.name] = read_folder(d, experiment, deep)
        if deep and d.is_dir():
            other += _temp_files(d, now)
    if deep:
        other += _temp_files(base, now) + _temp_files(root / Path(experiment).parent, now,
                                                      prefix=f".{index.path.name}.")
    return Scan(root, experiment, index, folders, unfinished, other)


def read_folder(d: Path, experiment: str, deep: bool) -> Folder:
    """A finished folder's metrics.json (and, deep, its other files), problems collected."""
    mpath = d / "metrics.json"
    mtime = mpath.stat().st_mtime if mpath.exists() else d.stat().st_mtime
    folder = Folder(d.name, d, None, mtime)
    try:
        folder.data = read_metrics(mpath)
    except DataError as e:
        folder.error = e
        folder.problems.append(Problem("damaged_file", mpath, d.name, str(e), False))
        return folder
    named = (folder.data.get("run_id"), folder.data.get("experiment"))
    if named[0] not in (None, d.name) or not _same_experiment(named[1], experiment):
        folder.problems.append(Problem("misplaced_run", mpath, d.name, (
            f"{mpath} names run {named[1]}/{named[0]}, but lies in {experiment}/{d.name}/: "
            f"the folder was moved or copied by hand. Move it back, or delete it and rerun "
            f"the same command."), False))
    if deep:
        folder.problems += _file_problems(folder)
    return folder


def _same_experiment(named: Any, experiment: str) -> bool:
    """metrics.json's experiment against the folder's place (which may carry a prefix:
    results/rehearsal/ralm/table1 holds experiment ralm/table1)."""
    return named is None or experiment == named or experiment.endswith(f"/{named}")


def _file_problems(folder: Folder) -> list[Problem]:
    """Damage in a finished folder's other files: config.json and code.json are JSON objects,
    every *.json parses, every *.jsonl line is a record, samples.jsonl holds its count."""
    out: list[Problem] = []
    files = sorted(p for p in folder.dir.iterdir() if p.is_file()
                   and p.suffix in (".json", ".jsonl") and not p.name.startswith("."))
    if not (folder.dir / "config.json").exists():
        files.append(folder.dir / "config.json")  # always written: its absence is damage
    for path in files:
        if path.name == "metrics.json":
            continue
        try:
            if path.suffix == ".jsonl":
                records = read_records(path, finished=True)
                if path.name == "samples.jsonl":
                    out += _count_problem(folder, path, len(records))
            elif path.name in ("config.json", "code.json"):
                read_run_json(path, {"versions": list} if path.name == "code.json" else {})
            else:
                read_run_json_any(path)
        except DataError as e:
            out.append(Problem("damaged_file", path, folder.run_id, str(e), False))
    return out


def read_run_json_any(path: Path) -> None:
    """Any other JSON file of a run (retrieval.json, ...): it must parse."""
    try:
        read_run_json(path)
    except DataError as e:
        if "where an object is expected" not in str(e):  # a list is fine here
            raise


def _count_problem(folder: Folder, path: Path, n: int) -> list[Problem]:
    data = folder.data or {}
    for part, key in RECORD_COUNTS:
        count = (data.get(part) or {}).get(key)
        if isinstance(count, int) and not isinstance(count, bool):
            if n < count:
                return [Problem("samples_short", path, folder.run_id, (
                    f"{path} holds {n} records but the run counted {count} ({part}.{key}): "
                    f"the file was cut. The run cannot be trusted: delete the folder "
                    f"{folder.dir}/ and rerun the same command."), False)]
            return []
    return []


def _unfinished(d: Path, base: Path, index: CsvIndex, now: float,
                drop_unfinished: bool) -> Problem:
    """A tmp_ folder: its age, whether a live writer holds it, whether its row is written."""
    run_id = d.name[4:]
    newest = max([d.stat().st_mtime, *(p.stat().st_mtime for p in d.iterdir())])
    held = writer_is_live(base / f"{run_id}{WRITER_SUFFIX}", now)
    with_row = run_id in _index_run_ids(index)
    what = (f"{d}/ is an unfinished run, last written {_age(now - newest)} ago"
            + (f"; a live writer holds it ({run_id}{WRITER_SUFFIX})" if held else "")
            + ("; its row is already in the CSV (a commit was interrupted)" if with_row else "")
            + ". Rerun the same command to finish it")
    what += ("." if held else "; `--repair --drop-unfinished` deletes it.")
    return Problem("unfinished_run", d, run_id, what, drop_unfinished and not held)


def writer_is_live(lock: Path, now: float) -> bool:
    """Whether a run's writer lock (ragrepro.runlock) shows a sign of life within the default
    stale time: its holder rewrites it every heartbeat."""
    try:
        return now - lock.stat().st_mtime <= WriterSettings().stale_s
    except FileNotFoundError:
        return False


def _temp_files(d: Path, now: float, prefix: str = ".") -> list[Problem]:
    """`.<name>.<random>` files (io.atomic_write_text, the writer lock's own) in folder d."""
    out = []
    for p in sorted(d.iterdir()) if d.is_dir() else []:
        if not (p.is_file() and p.name.startswith(prefix) and p.name.count(".") >= 3):
            continue
        age = now - p.stat().st_mtime
        old = age > TEMP_GRACE_S
        out.append(Problem("temp_file", p, None, (
            f"{p} is a temporary file of an atomic write, {_age(age)} old: "
            + ("a kill left it behind; `--repair` removes it." if old else
               "it may be in use right now, so it is left alone.")), old))
    return out


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{max(seconds, 0):.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _index_run_ids(index: CsvIndex) -> set[str]:
    if "run_id" not in index.header:
        return set()
    i = index.header.index("run_id")
    return {f[i] for _, f in index.rows if i < len(f) and f[i]}


# ---- comparing (pure) -------------------------------------------------------------------
def index_problems(index: CsvIndex, expected: Mapping[str, Mapping[str, str]],
                   untrusted: set[str], unfinished: set[str]) -> list[Problem]:
    """Every way the CSV differs from the rows its folders give (`expected`, by run id).
    Rows of `untrusted` runs (a damaged folder) and of `unfinished` ones are not compared."""
    path = index.path
    out: list[Problem] = []
    if not index.exists or not (index.header or index.rows or index.unreadable):
        return [_missing_row(path, rid) for rid in expected]  # absent or empty: no rows
    if index.unreadable:
        line, what = index.unreadable
        out.append(Problem("csv_unreadable", path, None,
                           f"{path}:{line}: binary data ({what})", True))
    header_problem = _header_problem(index)
    if header_problem:
        out.append(header_problem)
        return out + [_missing_row(path, rid) for rid in expected]
    unknown = unknown_columns(index, expected, untrusted | unfinished)
    out += [Problem("unknown_column", path, None, (
        f"{path}: column {c!r} is not a column any run records (garbage in the header)"),
        True) for c in unknown]
    seen: set[str] = set()
    for line, fields in index.rows:
        out += _row_problems(index, line, fields, expected, untrusted | unfinished, seen,
                             set(unknown))
    out += [_missing_row(path, rid) for rid in expected if rid not in seen]
    return out


def _header_problem(index: CsvIndex) -> Problem | None:
    header, path = index.header, index.path
    if not header:
        what = "it is empty"
    elif len(set(header)) != len(header):
        what = f"repeated column names {sorted({c for c in header if header.count(c) > 1})}"
    elif not index.is_runner_csv:
        missing = [c for c in RUN_COLUMNS if c not in header]
        what = f"no column {', '.join(missing)}: it is not the index the runner writes"
    else:
        return None
    return Problem("bad_header", path, None, f"{path}: the header is damaged ({what})", True)


def unknown_columns(index: CsvIndex, expected: Mapping[str, Mapping[str, str]],
                    kept: set[str]) -> list[str]:
    """Header columns no finished run's row has and no row of a kept run fills in."""
    known = set(RUN_COLUMNS)
    for row in expected.values():
        known.update(row)
    i = index.header.index("run_id")
    for _, fields in index.rows:
        if i < len(fields) and fields[i] in kept and len(fields) == len(index.header):
            known.update(c for c, v in zip(index.header, fields) if v)
    return [c for c in index.header if c not in known]


def _row_problems(index: CsvIndex, line: int, fields: list[str],
                  expected: Mapping[str, Mapping[str, str]], kept: set[str], seen: set[str],
                  unknown: set[str]) -> list[Problem]:
    path, header = index.path, index.header
    i = header.index("run_id")
    rid = fields[i] if i < len(fields) else ""
    where = f"{path}:{line}"
    if len(fields) != len(header):
        seen.add(rid)
        whose = f"run {rid}" if rid in expected else "naming no finished run"
        return [Problem("field_count", path, rid or None, (
            f"{where}: a row ({whose}) has {len(fields)} field(s), the header {len(header)} "
            f"(a cut or garbled line)"), True)]
    if rid in seen:
        return [Problem("duplicate_row", path, rid, f"{where}: a second row of run {rid}",
                        True)]
    seen.add(rid)
    if rid in kept:
        return []
    if rid not in expected:
        who = f"run {rid!r}" if rid else "a row without run id"
        return [Problem("row_without_run", path, rid or None, (
            f"{where}: {who} has no finished folder under {path.with_suffix('')}/ (deleted by "
            f"hand, or garbage)"), True)]
    diffs = differing(dict(zip(header, fields)), expected[rid], unknown)
    if not diffs:
        return []
    shown = "; ".join(f"{c}: CSV {a!r}, folder {b!r}" for c, a, b in diffs[:4])
    more = f" (+{len(diffs) - 4} more)" if len(diffs) > 4 else ""
    return [Problem("value_differs", path, rid, (
        f"{where}: run {rid} differs from {path.with_suffix('')}/{rid}/metrics.json in "
        f"{len(diffs)} column(s): {shown}{more}"), True)]


def differing(row: Mapping[str, str], want: Mapping[str, str],
              skip: Iterable[str] = ()) -> list[tuple[str, str | None, str]]:
    """(column, CSV text or None when the CSV lacks the column, folder text) per difference;
    finished_at is never compared."""
    skipped = UNCOMPARED | set(skip)
    columns = [c for c in dict.fromkeys([*row, *want]) if c not in skipped]
    return [(c, row.get(c), want.get(c, "")) for c in columns
            if row.get(c, "") != want.get(c, "")]


def _missing_row(path: Path, rid: str) -> Problem:
    return Problem("run_without_row", path, rid,
                   f"{path}: the finished run {path.with_suffix('')}/{rid}/ has no row", True)


def rebuilt_index(index: CsvIndex, expected: Mapping[str, Mapping[str, str]],
                  kept: set[str]) -> tuple[list[str], list[dict[str, str]]]:
    """(header, rows) of the repaired CSV: the CSV's rows in their order, each rebuilt from
    its folder (keeping the CSV's finished_at when it reads as one); rows of `kept` runs
    (unfinished, or a damaged folder) as they are when whole; the other rows dropped; then
    the finished folders the CSV lacked. Columns keep the header's order."""
    rows: list[dict[str, str]] = []
    seen: set[str] = set()
    sane = _header_problem(index) is None if index.exists else False
    if sane:
        header = index.header
        i, t = header.index("run_id"), header.index("finished_at")
        for _, fields in index.rows:
            rid = fields[i] if i < len(fields) else ""
            if not rid or rid in seen:
                continue
            if rid in expected:
                row = dict(expected[rid])
                stamp = fields[t] if t < len(fields) else ""
                if TIMESTAMP.fullmatch(stamp):
                    row["finished_at"] = stamp
            elif rid in kept and len(fields) == len(header):
                row = dict(zip(header, fields))
            else:
                continue
            rows.append(row)
            seen.add(rid)
    rows += [dict(row) for rid, row in expected.items() if rid not in seen]
    order = index.header if sane else []
    used = {c for r in rows for c, v in r.items() if v} | {c for rid in expected
                                                          for c in expected[rid]}
    header = [c for c in order if c in used]
    header += [c for r in rows for c in r if c not in header and c in used]
    return (list(dict.fromkeys(header)) if rows else []), rows


# ---- on disk ----------------------------------------------------------------------------
def check_experiment(root: Path, experiment: str, now: float | None = None,
                     drop_unfinished: bool = False) -> list[Problem]:
    """Every problem of one experiment: its folders' files, its CSV, its leftovers."""
    s = scan(root, experiment, deep=True, now=now, drop_unfinished=drop_unfinished)
    out = [p for f in s.folders.values() for p in f.problems]
    out += index_problems(s.index, s.expected(), s.untrusted(), s.unfinished)
    return out + s.other


def write_index(path: Path, header: Sequence[str], rows: Sequence[Mapping[str, str]]) -> None:
    """The repaired CSV, atomically (the caller holds the CSV's lock)."""
    buf = io.StringIO()
    if header:
        writer = csv.DictWriter(buf, fieldnames=list(header), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def repair_index(root: Path, experiment: str) -> list[Problem]:
    """Rebuild the CSV from the folders under the CSV's lock (the lock `append_csv_row`
    takes), from a fresh read; returns the problems it fixed."""
    path = Path(root) / f"{experiment}.csv"
    with locked(path):
        s = scan(root, experiment)
        expected = s.expected()
        problems = index_problems(s.index, expected, s.untrusted(), s.unfinished)
        if problems and (s.index.exists or expected):
            write_index(path, *rebuilt_index(s.index, expected, s.untrusted() | s.unfinished))
    return problems


def repair(root: Path, experiment: str, problems: Sequence[Problem]) -> list[str]:
    """Fix the repairable `problems` of one experiment; returns one line per action."""
    done: list[str] = []
    if any(p.kind in INDEX_KINDS and p.repairable for p in problems):
        fixed = repair_index(root, experiment)
        done.append(f"rewrote {Path(root) / f'{experiment}.csv'} from the run folders "
                    f"({len(fixed)} problem(s) fixed)")
    for p in problems:
        if not p.repairable or p.kind in INDEX_KINDS:
            continue
        if p.kind in ("replaced_leftover", "unfinished_run"):
            shutil.rmtree(p.path, ignore_errors=True)
            done.append(f"removed {p.path}/")
        elif p.kind == "temp_file":
            p.path.unlink(missing_ok=True)
            done.append(f"removed {p.path}")
    return done


def validated_rows(root: Path, experiment: str) -> tuple[list[dict[str, str]], bool]:
    """The experiment's CSV rows for a report, checked against its finished folders, and
    whether they were checked (a CSV without the runner's columns is read as it is).

    A damaged metrics.json or an unreadable CSV raises a DataError naming the file and the
    fix. Any other difference is repaired from the folders with a warning, and the CSV is
    rewritten (under its lock; a read-only results folder keeps it, with a warning)."""
    s = scan(root, experiment)
    if not s.index.exists:
        return [], False
    if s.index.unreadable:
        raise csv_damaged(s.index.path, s.index.unreadable[1], s.index.unreadable[0])
    for f in s.folders.values():
        if f.error is not None:
            raise f.error
    if not s.index.is_runner_csv:
        return [dict(zip(s.index.header, f)) for _, f in s.index.rows], False
    expected = s.expected()
    kept = s.untrusted() | s.unfinished
    problems = index_problems(s.index, expected, s.untrusted(), s.unfinished)
    if not problems:
        return [dict(zip(s.index.header, f)) for _, f in s.index.rows], True
    for p in problems:
        log.warning("%s", p.repaired())
    try:
        repair_index(root, experiment)
    except OSError as e:
        log.warning("Could not rewrite %s (%s); this report uses the run folders' values. Run "
                    "`ragrepro check --repair` where the results folder is writable.",
                    s.index.path, e)
    return rebuilt_index(s.index, expected, kept)[1], True


# ---- the command --------------------------------------------------------------------------
def experiments_under(root: Path) -> list[str]:
    """Every experiment of a results folder: its CSV indexes and the folders of finished or
    unfinished runs (`<experiment>/<run>/metrics.json`, `<experiment>/tmp_<run>/`)."""
    root = Path(root)
    if not root.is_dir():
        return []
    names = {p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.csv")
             if (p.parent / p.stem).is_dir() or _looks_like_index(p)}
    for p in root.rglob("*"):
        if p.is_dir() and (p.name.startswith("tmp_") or (p / "metrics.json").is_file()):
            names.add(p.parent.relative_to(root).as_posix())
    return sorted(n for n in names if n and n.split("/")[0] != "report")


def _looks_like_index(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            first = f.readline()
    except OSError:
        return False
    return set(RUN_COLUMNS) <= {c.strip() for c in first.split(",")}


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="ragrepro check", description=(
        "Check a results folder: every experiment's CSV against its run folders, and every "
        "run file for damage. Exit code 0: clean; 1: problems found; 2: usage error."))
    ap.add_argument("experiments", nargs="*", help="experiment names (default: every one)")
    ap.add_argument("--results-dir", type=Path, default=None, help="default: results/ "
                    "(or $RAGREPRO_RESULTS)")
    ap.add_argument("--repair", action="store_true", help="fix what is repairable: rows "
                    "rebuilt from the folders, rows of deleted runs dropped, leftovers removed")
    ap.add_argument("--drop-unfinished", action="store_true", help="with --repair: also "
                    "delete unfinished tmp_ runs that no live writer holds")
    return ap.parse_args(list(argv))


def run_check(root: Path, experiments: Sequence[str], repair_too: bool,
              drop_unfinished: bool, out: Any = None) -> int:
    """Print one line per problem and a summary; with repair_too fix what is repairable and
    check again. Returns the exit code: 0 clean, 1 problems (left)."""
    out = out or sys.stdout
    names = list(experiments) or experiments_under(root)
    found = {name: check_experiment(root, name, drop_unfinished=drop_unfinished)
             for name in names}
    for name, problems in found.items():
        for p in problems:
            out.write(f"{name}: {p.line()}\n")
    total = sum(len(p) for p in found.values())
    fixable = sum(p.repairable for ps in found.values() for p in ps)
    out.write(f"checked {len(names)} experiment(s) under {root}: {total} problem(s), "
              f"{fixable} repairable\n")
    if not repair_too or not total:
        return 1 if total else 0
    for name, problems in found.items():
        for action in repair(root, name, problems):
            out.write(f"{name}: {action}\n")
    left = {name: check_experiment(root, name) for name in names}
    remaining = [(name, p) for name, ps in left.items() for p in ps
                 if not (p.kind == "unfinished_run" and not drop_unfinished)]
    for name, p in remaining:
        out.write(f"{name}: not repaired: {p.line()}\n")
    out.write(f"after repair: {len(remaining)} problem(s) left"
              + (" (unfinished runs are left alone without --drop-unfinished)"
                 if any(p.kind == "unfinished_run" for ps in left.values() for p in ps)
                 else "") + "\n")
    return 1 if remaining else 0


def main(argv: Sequence[str]) -> None:
    args = parse_args(argv)
    if args.drop_unfinished and not args.repair:
        print("error: --drop-unfinished only applies with --repair", file=sys.stderr)
        raise SystemExit(2)
    root = Path(args.results_dir) if args.results_dir else results_dir()
    if not root.is_dir():
        print(f"error: no results folder {root}: give --results-dir", file=sys.stderr)
        raise SystemExit(2)
    unknown = [e for e in args.experiments if not (root / e).is_dir()
               and not (root / f"{e}.csv").exists()]
    if unknown:
        known = ", ".join(experiments_under(root)) or "none"
        print(f"error: no experiment {', '.join(unknown)} under {root} (known: {known})",
              file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(run_check(root, args.experiments, args.repair, args.drop_unfinished))
