"""Re-lay out a committed `runs`-layout results table to its spec's current columns, from the
table's own cells, when its run folders are not at hand.

    python -m scripts.relayout_table results/riches/keys_table.md riches/keys
    python -m scripts.relayout_table results/riches/main_ladder_table.md riches/main_ladder --stdout

A table built by ragrepro.report.run_rows is rebuilt from its runs with `ragrepro table
<name>`. Where the runs are elsewhere (a committed table measured on another machine), this
gives what that rebuild would write for the Markdown, without recomputing a number:

- the columns are the ones the spec's Markdown header would have (`run_rows.header_of`: the
  `by` columns, the spec's metrics that the old table has values for, their paired tests, the
  flags column when the old table has one, the spec's `context`), each cell copied verbatim
  from the old table; a column the new header needs but the old table lacks is refused;
- the note is the spec's note (as `run_rows.write` formats it) followed by the sentence
  `run_rows.shared_settings_note` writes for the `note_columns` the new header leaves out,
  computed over the old table's cells of those columns (passed through the spec's
  `row_hook` with no run folder, as the renderer passes its rows); a note column the old
  table stated only in its own note (not as a column) keeps that statement verbatim;
- the title, any text before the note and everything after the table stay as they are.

The CSV beside the table (secondary metrics, `csv_also`) needs the runs: it is not written.
"""
from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragrepro.errors import ConfigError, DataError
from ragrepro.io import atomic_write_text
from ragrepro.report import run_rows
from ragrepro.report.readable import MAX_COLUMNS, RULE, check_columns, split_row
from ragrepro.report.result_specs import load_result_spec
from ragrepro.report.samples import DEFAULT_STATS

log = logging.getLogger("relayout_table")

# What run_rows.shared_settings_note puts before its parts (and "." after them).
SHARED_PREFIX = "Settings not shown as columns (all in the CSV): "


@dataclass
class TableFile:
    """A results-table page split into the parts a relayout touches and the rest."""
    head: list[str]     # the lines before the note paragraph (the title, blank lines, ...)
    note: str           # the paragraph right before the table ("" when there is none)
    header: list[str]
    body: list[list[str]]
    tail: list[str]     # every line after the table, as it is


def parse(text: str, where: str = "the table") -> TableFile:
    """The first Markdown table of a page, the paragraph before it (its note) and the rest."""
    lines = text.split("\n")
    start = next((i for i in range(len(lines) - 1) if lines[i].lstrip().startswith("|")
                  and RULE.match(lines[i + 1].strip())), None)
    if start is None:
        raise DataError(f"{where}: no Markdown table found.")
    end = start + 2
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        end += 1
    header = split_row(lines[start])
    body = [split_row(ln) for ln in lines[start + 2:end]]
    bad = [i + 1 for i, r in enumerate(body) if len(r) != len(header)]
    if bad:
        raise DataError(f"{where}: table row(s) {bad} do not have the header's "
                        f"{len(header)} cells.")
    before = lines[:start]
    while before and before[-1].strip() == "":
        before.pop()
    note_at = len(before)
    while note_at > 0 and before[note_at - 1].strip() != "" \
            and not before[note_at - 1].startswith("#"):
        note_at -= 1
    note = " ".join(ln.strip() for ln in before[note_at:])
    return TableFile(before[:note_at], note, header, body, lines[end:])


def split_note(note: str, columns: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The note without its `Settings not shown as columns` sentence, and that sentence's
    parts by column (`col = value ...` or `col varies by row (...)`), as written."""
    at = note.find(SHARED_PREFIX)
    if at < 0:
        return note, {}
    base, sentence = note[:at].rstrip(), note[at + len(SHARED_PREFIX):].rstrip()
    sentence = sentence.removesuffix(".")
    names = "|".join(re.escape(c) for c in sorted(columns, key=len, reverse=True))
    if not names:
        return base, {}
    start = re.compile(rf"(?:{names})(?= = | varies by row)")
    parts: dict[str, str] = {}
    for part in re.split(rf"; (?={start.pattern})", sentence):
        m = start.match(part)
        if m:
            parts[m.group(0)] = part
        else:
            log.warning("note part %r names no note column of the spec: left out", part)
    return base, parts


def spec_note(spec: dict[str, Any]) -> str:
    """The spec's note as run_rows.write formats it."""
    return spec.get("note", "").format(resamples=DEFAULT_STATS.resamples,
                                       seed=DEFAULT_STATS.seed)


def new_header(spec: dict[str, Any], old: TableFile) -> list[str]:
    """The columns the spec's Markdown header has for the old table's rows: its metrics with
    a value in some row, a flags column when the old table has one (run_rows.header_of)."""
    col = {c: i for i, c in enumerate(old.header)}
    missing = [m for m in spec["metrics"] if m not in col]
    if missing:
        log.info("metric(s) %s not in the old table: taken as absent (no row has them)",
                 ", ".join(missing))
    metrics = [m for m in spec["metrics"] if m in col
               and any(r[col[m]] != "" for r in old.body)]
    return run_rows.header_of(spec, metrics, "flags" in col)


def note_rows(spec: dict[str, Any], old: TableFile) -> list[dict[str, str]]:
    """The old table's rows (column -> cell) through the spec's `row_hook` as the renderer
    passes them, with an empty runs folder: what a hook derives from a row's own values
    (e.g. the RICHES label of an llm-judge row that predates the judge accuracy) is stated as
    a rebuild would; nothing is read from a run."""
    hook = run_rows._hook(spec)
    with tempfile.TemporaryDirectory() as no_runs:
        return [hook(dict(zip(old.header, r)), Path(no_runs)) for r in old.body]


def relayout(text: str, spec: dict[str, Any], where: str = "the table",
             keep_note: bool = False) -> str:
    """The page `text` (a committed table of spec's layout) with the spec's current columns
    and note; cells copied verbatim from the old table."""
    if spec.get("layout") != "runs":
        raise ConfigError(f"{spec.get('name')}: layout {spec.get('layout')!r}; this script "
                          f"re-lays out `runs`-layout tables (ragrepro.report.run_rows) only.")
    old = parse(text, where)
    by = list(spec["by"])
    if old.header[:len(by)] != by:
        raise DataError(f"{where}: its first columns {old.header[:len(by)]} are not the spec's "
                        f"`by` {by}: the rows would differ; rebuild it from its runs.")
    header = new_header(spec, old)
    col = {c: i for i, c in enumerate(old.header)}
    lacking = [c for c in header if c not in col]
    if lacking:
        raise DataError(f"{where}: the spec {spec['name']} shows column(s) {lacking} the old "
                        f"table does not have; rebuild it from its runs.")
    check_columns(header, f"results table {spec['name']} (its spec: report/tables/"
                          f"{spec['name']}.yaml of its method's conf folder)", MAX_COLUMNS)
    body = [[r[col[c]] for c in header] for r in old.body]

    note_columns = list(spec.get("note_columns") or [])
    old_base, old_parts = split_note(old.note, [*note_columns, *old.header])
    rows = note_rows(spec, old)
    parts = []
    for c in (c for c in note_columns if c not in header):
        if any(c in r for r in rows):  # over the old cells, as the renderer over the rows
            sentence = run_rows.shared_settings_note(rows, [c])
            part = sentence[len(SHARED_PREFIX):-1] if sentence else ""
        else:  # the old table stated it only in its note: that statement, as written
            part = old_parts.get(c, "")
            log.info("note column %s: %s", c, f"stated as the old note did ({part!r})" if part
                     else "neither a column nor in the old note; not stated")
        if part:
            parts.append(part)
    dropped = sorted(set(old_parts) - set(note_columns))
    if dropped:
        log.warning("old note settings %s are no note_columns of the spec: left out", dropped)
    shared = SHARED_PREFIX + "; ".join(parts) + "." if parts else ""
    base = old_base if keep_note else spec_note(spec)
    if not keep_note and old_base != base:
        log.info("%s: the note is the spec's (not the old table's own text)", where)
    note = " ".join(p for p in (base, shared) if p)

    title = spec["title"].format(table=spec["name"].split("/")[-1])
    if f"# {title}" not in old.head:
        log.warning("%s: title differs from the spec's %r; kept as it is", where, title)
    table = run_rows.to_markdown("", header, body).split("\n", 2)[2]  # the table lines only
    lines = list(old.head)
    if note:
        while lines and lines[-1].strip() == "":
            lines.pop()
        lines += ["", note]
    return "\n".join([*lines, "", table.rstrip("\n"), *old.tail])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("table", type=Path, help="committed table page, e.g. "
                                             "results/riches/keys_table.md")
    ap.add_argument("spec", help="its results spec, e.g. riches/keys "
                                 "(<method>/conf/report/tables/<spec>.yaml)")
    ap.add_argument("--stdout", action="store_true", help="print instead of rewriting")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when the page is not in the spec's layout; write nothing")
    ap.add_argument("--keep-note", action="store_true",
                    help="keep the old note's own text (default: the spec's note, as a "
                         "rebuild writes it); the settings sentence is rewritten either way")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        text = args.table.read_text("utf-8")
        out = relayout(text, load_result_spec(args.spec), str(args.table), args.keep_note)
    except (ConfigError, DataError, OSError) as e:
        log.error("%s", e)
        return 2
    if args.check:
        return 0 if out == text else 1
    if args.stdout:
        sys.stdout.write(out)
    elif out != text:
        atomic_write_text(args.table, out)
        log.info("%s: %d -> %d columns", args.table, len(parse(text).header),
                 len(parse(out).header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
