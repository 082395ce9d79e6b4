"""Regenerate the measured-number blocks of README.md and docs/*.md from the files the code writes.

A block is delimited by two HTML comments, invisible on GitHub:

    <!-- generated from results/ralm/table1.md table=1 -->
    ...replaced by `make docs`...
    <!-- end generated -->

The source path is relative to the repository root. Selectors (optional):
`section=NAME` keeps the body of the source's `## NAME` section, `table=N` keeps the N-th
Markdown table (1-based), applied left to right (`section=riches table=1`: the first table of
that section); without options the whole source is included. A block whose
source is absent (run outputs are not committed) keeps its text and is reported, so docs never
lose numbers because a run has not been made on this machine.

    python -m scripts.docs           # rewrite the blocks in place
    python -m scripts.docs --check   # exit 1 if a block differs from its source
"""
from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
BEGIN = re.compile(r"^<!-- generated from (?P<source>\S+)(?P<options>(?: [a-z]+=\S+)*) -->$")
OPTIONS = ("section", "table")
END = "<!-- end generated -->"


@dataclass(frozen=True)
class Block:
    """One generated block: where it sits in the page and what fills it."""
    source: str
    options: tuple[tuple[str, str], ...]  # (name, value) in the order written
    begin: int  # line index of the opening comment
    end: int  # line index of the closing comment


def find_blocks(lines: list[str], page: str = "<page>") -> list[Block]:
    """The generated blocks of a page, in order; unclosed or nested blocks are errors."""
    blocks: list[Block] = []
    open_at: int | None = None
    match = None
    for i, line in enumerate(lines):
        m = BEGIN.match(line.strip())
        if m:
            if open_at is not None:
                raise ValueError(f"{page}:{i + 1}: a generated block opens inside the block opened "
                                 f"at line {open_at + 1}; close that one with '{END}' first")
            parse_options(m["options"], f"{page}:{i + 1}")
            open_at, match = i, m
        elif line.strip() == END:
            if open_at is None or match is None:
                raise ValueError(f"{page}:{i + 1}: '{END}' without an opening "
                                 "'<!-- generated from PATH -->' comment")
            blocks.append(Block(match["source"], parse_options(match["options"], page), open_at, i))
            open_at = None
        elif line.lstrip().startswith("<!-- generated"):
            raise ValueError(f"{page}:{i + 1}: malformed marker {line.strip()!r}; write "
                             "'<!-- generated from PATH -->', optionally with table=N or section=NAME")
    if open_at is not None:
        raise ValueError(f"{page}:{open_at + 1}: generated block is never closed; add '{END}'")
    return blocks


def markdown_tables(text: str) -> list[str]:
    """Every run of consecutive lines starting with '|', in order."""
    tables: list[list[str]] = []
    current: list[str] = []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return ["\n".join(t) for t in tables]


def section_body(text: str, name: str) -> str:
    """The lines under '## name' up to the next heading of level 1 or 2, blank edges removed."""
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == f"## {name}")
    except StopIteration:
        raise ValueError(f"no section '## {name}' in the source; pick one of "
                         f"{[ln[3:] for ln in lines if ln.startswith('## ')]}") from None
    stop = next((j for j in range(start + 1, len(lines)) if re.match(r"^#{1,2} ", lines[j])),
                len(lines))
    return "\n".join(lines[start + 1:stop]).strip("\n")


def parse_options(text: str, where: str) -> tuple[tuple[str, str], ...]:
    """' section=x table=2' -> (('section', 'x'), ('table', '2')); unknown names are errors."""
    pairs = tuple(tuple(item.split("=", 1)) for item in text.split())
    for name, value in pairs:
        if name not in OPTIONS:
            raise ValueError(f"{where}: unknown option {name}={value}; use one of {OPTIONS}")
        if name == "table" and not value.isdigit():
            raise ValueError(f"{where}: table={value} must be a table number counted from 1")
    return pairs  # type: ignore[return-value]


def select(text: str, options: tuple[tuple[str, str], ...]) -> str:
    """The part of a source file a block shows: options apply left to right (section, then table)."""
    for name, value in options:
        if name == "section":
            text = section_body(text, value)
        else:
            tables = markdown_tables(text)
            n = int(value)
            if not 1 <= n <= len(tables):
                raise ValueError(f"table={n} asked for, but the source (after the options before "
                                 f"it) has {len(tables)} Markdown tables")
            text = tables[n - 1]
    return text.strip("\n")


def render(page_text: str, read: Callable[[str], str | None],
           page: str = "<page>") -> tuple[str, list[str]]:
    """The page with every block refilled from read(source); also the sources that were absent."""
    lines = page_text.split("\n")
    missing: list[str] = []
    out: list[str] = []
    last = 0
    for block in find_blocks(lines, page):
        out.extend(lines[last:block.begin + 1])
        source_text = read(block.source)
        if source_text is None:
            missing.append(block.source)
            out.extend(lines[block.begin + 1:block.end])
        else:
            out.extend(select(source_text, block.options).split("\n"))
        last = block.end
    out.extend(lines[last:])
    return "\n".join(out), missing


def read_repo_file(root: Path) -> Callable[[str], str | None]:
    def read(source: str) -> str | None:
        path = root / source
        return path.read_text() if path.is_file() else None
    return read


def read_committed_file(root: Path) -> Callable[[str], str | None] | None:
    """A reader of files as committed at HEAD (`git show HEAD:path`), or None outside a git
    checkout. A local run rewrites tracked sources (make reproduce-table1 writes
    results/ralm/table1.md), so the committed pages are checked against the committed
    sources, never against what this machine computed (issue 28)."""
    try:
        inside = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"],
                                capture_output=True, text=True, check=False)
    except OSError:
        return None
    if inside.returncode != 0:
        return None

    def read(source: str) -> str | None:
        done = subprocess.run(["git", "-C", str(root), "show", f"HEAD:{source}"],
                              capture_output=True, check=False)
        return done.stdout.decode("utf-8") if done.returncode == 0 else None
    return read


def stale_pages(root: Path) -> list[str]:
    """Pages whose generated blocks differ from their sources, each page compared in its own
    state: a page as committed with the sources as committed, a page edited here with the
    sources here (`make docs` after a rerun, before its commit). Outside git, the files as
    they are. On a fresh clone (CI) both states are the commit."""
    committed = read_committed_file(root)
    out = []
    for path in pages(root):
        rel = str(path.relative_to(root))
        text = path.read_text()
        head = committed(rel) if committed is not None else None
        read = committed if head is not None and head == text else read_repo_file(root)
        if render(text, read, rel)[0] != text:
            out.append(rel)
    return out


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def refresh(root: Path, check: bool) -> list[Path]:
    """Rewrite (or, with check, only compare) every page; returns the pages that were stale."""
    stale = []
    for path in pages(root):
        text = path.read_text()
        new, missing = render(text, read_repo_file(root), str(path.relative_to(root)))
        for source in missing:
            log.warning("%s: source %s is absent; block left as it is", path.name, source)
        if new != text:
            stale.append(path)
            if not check:
                path.write_text(new)
                log.info("refreshed %s", path.relative_to(root))
    return stale


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="report stale blocks, change nothing")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    stale = refresh(REPO_ROOT, args.check)
    if args.check and stale:
        log.error("stale generated blocks in %s: run `make docs`",
                  ", ".join(str(p.relative_to(REPO_ROOT)) for p in stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
