"""Readable tables: a Markdown table meant for reading keeps to about ten columns (issue 30:
27 columns of a RICHES table fit no page or terminal); settings every row shares go to the
note, secondary metrics stay in the CSV. The table generators call `check_columns` on what
they are about to write; tests/report/test_readable_tables.py reads every committed table
with `markdown_headers`."""
from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import ConfigError

MAX_COLUMNS = 10
RULE = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


def split_row(line: str) -> list[str]:
    """The cells of one Markdown table line (an escaped `\\|` stays inside its cell)."""
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]]


def markdown_headers(text: str) -> list[list[str]]:
    """The header cells of every Markdown table in `text`, in order."""
    lines = text.splitlines()
    return [split_row(lines[i - 1]) for i in range(1, len(lines))
            if RULE.match(lines[i].strip()) and lines[i - 1].lstrip().startswith("|")]


def check_columns(header: Sequence[str], where: str, limit: int = MAX_COLUMNS) -> None:
    """Refuse a readable table wider than `limit` columns, naming them and the fix."""
    if len(header) > limit:
        raise ConfigError(
            f"{where}: a table meant for reading keeps to at most {limit} columns, this one "
            f"has {len(header)} ({', '.join(header)}). Move settings every row shares into "
            f"the note (`note_columns`) and secondary metrics or paired tests into the CSV "
            f"(`csv_also`).")


def split_columns(header: Sequence[str], body: Sequence[Sequence[str]], keep: int,
                  limit: int = MAX_COLUMNS) -> list[tuple[list[str], list[list[str]]]]:
    """A table wider than `limit` as several readable ones, in column order, each repeating
    the first `keep` columns (the row labels) so every part reads on its own; the CSV beside
    it keeps the one wide table."""
    if len(header) <= limit:
        return [(list(header), [list(r) for r in body])]
    if keep >= limit:
        raise ConfigError(f"a table with {keep} row-label columns cannot be split into tables "
                          f"of at most {limit} columns; show fewer row labels.")
    width = limit - keep
    parts = []
    for start in range(keep, len(header), width):
        cols = [*range(keep), *range(start, min(start + width, len(header)))]
        parts.append(([header[i] for i in cols], [[r[i] for i in cols] for r in body]))
    return parts


def readable_markdown(header: Sequence[str], body: Sequence[Sequence[str]], keep: int) -> str:
    """The Markdown of `split_columns`: one table, or several separated by a blank line."""
    tables = []
    for head, rows in split_columns(header, body, keep):
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        tables.append("\n".join(lines + ["| " + " | ".join(map(str, r)) + " |" for r in rows]))
    return "\n\n".join(tables)
