"""`ragrepro verify`: a rebuilt results table against the committed one, cell by cell.

A user who ran `make reproduce-table1` on their machine has rewritten the tracked
`results/ralm/table1.md`; this compares every cell of every Markdown table in it with the same
cell of the file as committed (`git show HEAD:<path>`, or any revision) and prints, per cell,
"same as committed" or "differs by ...", with a stated tolerance: a number may differ by one
unit of its last printed digit or by `rtol` of its committed value (default 1%), whichever is
larger. Cells without numbers must be equal. Lines outside tables (the code version, times)
are not compared. Exit code 0 when every cell is the same or within tolerance, 1 otherwise,
2 for usage errors.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import verify_runs
from .errors import RagreproError
from .io import atomic_write_text
from .paths import results_dir

DEFAULT_RTOL = 0.01
DEFAULT_TABLES = ("results/ralm/table1.md",)
_NUMBER = re.compile(r"[-+]?\d+(?:\.(\d+))?(?:e[-+]?\d+)?")


@dataclass(frozen=True)
class Table:
    """One Markdown table: its header cells and its body rows' cells."""
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Cell:
    """The verdict on one cell: `same`, `within` (numbers within tolerance), `differs`."""
    table: int
    row: int
    column: str
    label: str
    status: str
    detail: str

    def line(self) -> str:
        where = f"table {self.table} row {self.row} ({self.label}) {self.column}"
        return f"{where}: {self.detail}"


def _cells(line: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in line.strip().strip("|").split("|"))


def parse_tables(text: str) -> list[Table]:
    """Every Markdown table of `text`, in order (a header row, a `|---|` rule, body rows)."""
    lines = text.splitlines()
    out: list[Table] = []
    i = 0
    while i < len(lines):
        rule = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if lines[i].lstrip().startswith("|") and re.fullmatch(r"\|?\s*:?-{3,}.*", rule):
            header = _cells(lines[i])
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_cells(lines[i]))
                i += 1
            out.append(Table(header, tuple(rows)))
        else:
            i += 1
    return out


def numbers(cell: str) -> tuple[str, list[tuple[float, int]]]:
    """(the cell with every number replaced by #, [(value, decimals printed)])."""
    found = [(float(m.group(0)), len(m.group(1) or "")) for m in _NUMBER.finditer(cell)]
    return _NUMBER.sub("#", cell), found


def compare_cell(committed: str, ours: str, rtol: float = DEFAULT_RTOL) -> tuple[str, str]:
    """(status, detail) of one cell: identical text is `same`; equal text around numbers that
    each differ by at most one unit of the last printed digit or rtol of the committed value
    is `within`; anything else `differs`."""
    if committed == ours:
        return "same", "same as committed"
    shape_a, nums_a = numbers(committed)
    shape_b, nums_b = numbers(ours)
    if shape_a != shape_b or len(nums_a) != len(nums_b):
        return "differs", f"differs: {ours!r} vs committed {committed!r}"
    worst = 0.0
    ok = True
    for (a, dec), (b, _) in zip(nums_a, nums_b):
        tol = max(10.0 ** -dec, rtol * abs(a))
        ok = ok and abs(b - a) <= tol * (1 + 1e-9)
        worst = max(worst, abs(b - a) / abs(a) if a else abs(b - a))
    verdict = "within tolerance" if ok else "outside tolerance"
    return ("within" if ok else "differs",
            f"differs by {worst:.2%} ({ours} vs committed {committed}; {verdict})")


def compare_tables(committed: str, ours: str, rtol: float = DEFAULT_RTOL) -> list[Cell]:
    """Every cell of every table of `ours` against the same cell of `committed`. A table or
    row that is missing on either side is one `differs` cell naming it."""
    a, b = parse_tables(committed), parse_tables(ours)
    out: list[Cell] = []
    if len(a) != len(b):
        out.append(Cell(0, 0, "-", "file", "differs",
                        f"{len(b)} tables vs {len(a)} committed"))
    for t, (ta, tb) in enumerate(zip(a, b), start=1):
        if ta.header != tb.header:
            out.append(Cell(t, 0, "header", "header", "differs",
                            f"columns {list(tb.header)} vs committed {list(ta.header)}"))
            continue
        if len(ta.rows) != len(tb.rows):
            out.append(Cell(t, 0, "-", "rows", "differs",
                            f"{len(tb.rows)} rows vs {len(ta.rows)} committed"))
        for r, (ra, rb) in enumerate(zip(ta.rows, tb.rows), start=1):
            label = _label(ra) or f"row {r}"
            for column, ca, cb in zip(ta.header, ra, rb):
                status, detail = compare_cell(ca, cb, rtol)
                out.append(Cell(t, r, column, label, status, detail))
    return out


def _label(row: Sequence[str]) -> str:
    """The row's leading text cells (up to three, e.g. model | retrieval | reranking), which
    name it for a reader; a cell that starts with a number ends them."""
    out = []
    for cell in row[:3]:
        if not cell or re.match(r"[-+]?\d", cell):
            break
        out.append(cell)
    return " | ".join(out)


def committed_text(path: str, rev: str = "HEAD", root: Path | None = None) -> str:
    """The file as committed at `rev`, read through git."""
    try:
        done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=root, capture_output=True,
                              check=False)
    except OSError as e:
        raise RagreproError(f"ragrepro verify needs git to read the committed {path} ({e}); "
                            f"run it inside a clone of the repository.") from e
    if done.returncode != 0:
        raise RagreproError(f"{path} is not committed at {rev} "
                            f"({done.stderr.decode(errors='replace').strip()}); name a table "
                            f"tracked in the repository, e.g. {DEFAULT_TABLES[0]}.")
    return done.stdout.decode("utf-8")


def verify_file(path: str, rev: str = "HEAD", rtol: float = DEFAULT_RTOL,
                root: Path | None = None) -> list[Cell]:
    committed = committed_text(path, rev, root)
    local = (root or Path.cwd()) / path
    if not local.is_file():
        raise RagreproError(f"{path}: no rebuilt table here. Rebuild it first (for Table 1: "
                            f"make reproduce-table1), then run ragrepro verify {path}.")
    return compare_tables(committed, local.read_text(encoding="utf-8"), rtol)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ragrepro verify", description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="*",
                    help="tracked table files, relative to the repository root (default: "
                    f"{' '.join(DEFAULT_TABLES)}, unless only --runs is given)")
    ap.add_argument("--runs", action="append", default=[], metavar="EXPERIMENT",
                    help="also compare this machine's finished runs of EXPERIMENT with its "
                    "committed evidence bundle, record by record (ragrepro/verify_runs.py)")
    ap.add_argument("--noise", type=float, default=None,
                    help="relative difference of a number counted as float noise by --runs "
                    "(default 1e-5)")
    ap.add_argument("--out", type=Path, default=None, metavar="FILE.md",
                    help="also write the verdicts as a Markdown record (the tables' summary "
                    "lines, every run's line) naming this machine's CPU")
    ap.add_argument("--rev", default="HEAD", help="the committed revision to compare with")
    ap.add_argument("--rtol", type=float, default=DEFAULT_RTOL,
                    help="relative tolerance per number (besides one unit of its last digit)")
    args = ap.parse_args(list(argv) if argv is not None else None)
    tables = args.tables or ([] if args.runs else list(DEFAULT_TABLES))
    try:
        text, bad = report(tables, args.rev, args.rtol) if tables else ("", 0)
        runs_text = ""
        if args.runs:
            noise = verify_runs.DEFAULT_NOISE if args.noise is None else args.noise
            if not 0 <= noise < 1:
                raise RagreproError(f"--noise {noise:g} must be a relative difference in [0, 1).")
            runs_text, bad_runs = verify_runs.report(results_dir(), args.runs, noise)
            bad += bad_runs
    except RagreproError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    sys.stdout.write(text + runs_text)
    if args.out is not None:
        atomic_write_text(args.out, record(argv_shown(argv), text, runs_text))
    return 1 if bad else 0


def argv_shown(argv: Sequence[str] | None) -> str:
    return " ".join(["ragrepro verify", *(sys.argv[1:] if argv is None else argv)])


def record(command: str, tables_text: str, runs_text: str, cpu: str | None = None) -> str:
    """The Markdown record of --out: the command, the machine, each table's summary line (its
    per-cell lines stay on the terminal) and every run's line."""
    from .metadata import cpu_model  # deferred: metadata imports torch; the table check does not

    summary = [line for line in tables_text.splitlines() if line.startswith("== ")
               and " against " not in line]
    body = "\n".join(summary + runs_text.splitlines())
    return (f"# ragrepro verify\n\nWritten by `{command}` on a machine with "
            f"{cpu or cpu_model()}.\n\n## Verdicts\n\n```\n{body}\n```\n")


def report(tables: Sequence[str], rev: str = "HEAD", rtol: float = DEFAULT_RTOL,
           root: Path | None = None) -> tuple[str, int]:
    """(the printed report, number of cells that differ beyond the tolerance)."""
    lines: list[str] = []
    bad = 0
    for path in tables:
        cells = verify_file(path, rev, rtol, root)
        counts = {s: sum(c.status == s for c in cells) for s in ("same", "within", "differs")}
        lines.append(f"== {path} against {rev}")
        lines += [f"  {c.line()}" for c in cells]
        lines.append(f"== {path}: {counts['same']} cells same as committed, {counts['within']} "
                     f"within tolerance, {counts['differs']} differ (tolerance: one unit of the "
                     f"last printed digit or {rtol:.0%} of the committed value)")
        bad += counts["differs"]
    return "\n".join(lines) + "\n", bad


if __name__ == "__main__":
    sys.exit(main())
