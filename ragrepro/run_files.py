"""Readers of the files a run writes (results/<experiment>/<run_id>/ and tmp_<run_id>/):
metrics.json, config.json, code.json, samples.jsonl, retrievals.jsonl, and the experiment's
CSV index. On damage each raises a DataError that names the file (and line), what is wrong
and what to do; nothing here guesses a value (docs/reliability.md, "Damaged files").

The fix depends on where the file lies: a finished folder cannot be trusted and is deleted
and rerun; an unfinished one (tmp_) is started over; the CSV is only an index and is rebuilt
from the run folders by `ragrepro check --repair` (ragrepro.results_check)."""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import DataError

# The keys of metrics.json (tracking.Run.write_results) and the JSON type each must have;
# `metrics` and `settings` are required, the others are checked when present.
METRICS_REQUIRED: Mapping[str, type] = {"metrics": dict, "settings": dict}
METRICS_OPTIONAL: Mapping[str, type] = {"metadata": dict, "timings_s": dict,
                                        "experiment": str, "run_id": str}
CHECK_HINT = "`ragrepro check` lists every damaged file of the results folder"


def damaged(path: Path, what: str, line: int | None = None) -> DataError:
    """The error for a damaged file of a run folder: the file (and line), the damage and the
    fix, which depends on whether the folder is a finished run or an unfinished one."""
    path = Path(path)
    where = f"{path}:{line}" if line is not None else str(path)
    folder = path.parent
    if folder.name.startswith("tmp_"):
        fix = (f"The unfinished run cannot resume from it: delete the folder {folder}/ (or "
               f"rerun with overwrite=true) and rerun the same command.")
    else:
        fix = (f"The run cannot be trusted: delete the folder {folder}/ and rerun the same "
               f"command ({CHECK_HINT}).")
    return DataError(f"{where} is damaged ({what}). {fix}")


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise damaged(path, "the file is missing") from None
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise damaged(path, f"not valid UTF-8 at byte {e.start}", line) from e


def read_run_json(path: Path, required: Mapping[str, type] | None = None,
                  optional: Mapping[str, type] | None = None) -> dict[str, Any]:
    """A JSON object a run wrote; `required` keys must be present with that JSON type,
    `optional` ones have it when present. Anything else raises `damaged`."""
    path = Path(path)
    text = _text(path)
    if not text.strip():
        raise damaged(path, "the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise damaged(path, f"malformed JSON at line {e.lineno}: {e.msg}") from e
    if not isinstance(data, dict):
        raise damaged(path, f"a JSON {_json_name(type(data))} where an object is expected")
    for key in required or {}:
        if key not in data:
            raise damaged(path, f"no {key!r} key")
    for key, kind in {**(required or {}), **(optional or {})}.items():
        if key in data and not isinstance(data[key], kind):
            want = _json_name(kind)
            raise damaged(path, f"{key!r} is a JSON {_json_name(type(data[key]))}, not "
                                f"{'an' if want[0] in 'aeiou' else 'a'} {want}")
    return data


def _json_name(kind: type) -> str:
    """What JSON calls a value of this Python type."""
    return {dict: "object", list: "list", str: "string", int: "number", float: "number",
            bool: "boolean", type(None): "null"}.get(kind, kind.__name__)


def read_metrics(path: Path) -> dict[str, Any]:
    """A run's metrics.json, checked for the keys every reader uses."""
    return read_run_json(path, METRICS_REQUIRED, METRICS_OPTIONAL)


def read_records(path: Path, finished: bool) -> list[dict[str, Any]]:
    """The records of a run's JSONL file (samples.jsonl, retrievals.jsonl); [] when absent.

    A finished run's file must be whole: any unreadable line raises `damaged` naming it. An
    unfinished run's file is its resume checkpoint: a torn last line (a kill mid-write, even
    inside a UTF-8 character) is dropped; an unreadable line before it raises."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, raw in enumerate(lines) if raw.strip()), default=-1)
    out: list[dict[str, Any]] = []
    for i, raw in enumerate(lines[: last + 1]):
        if not raw.strip():
            continue
        record, problem = _record(raw)
        if problem is None:
            out.append(record)
        elif finished or i < last:
            what = problem if finished else f"{problem}; only a torn last line is expected"
            raise damaged(path, what, i + 1)
    return out


def _record(raw: bytes) -> tuple[dict[str, Any], str | None]:
    """(record, None) for a line holding a JSON object, else ({}, what is wrong)."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        return {}, f"not valid UTF-8 at byte {e.start} of the line"
    except json.JSONDecodeError as e:
        return {}, f"malformed JSON at column {e.colno}: {e.msg}"
    if not isinstance(value, dict):
        return {}, f"a JSON {_json_name(type(value))} where an object is expected"
    return value, None


def csv_damaged(path: Path, what: str, line: int | None = None) -> DataError:
    """The error for a damaged results index: it is rebuilt from the run folders."""
    where = f"{path}:{line}" if line is not None else str(path)
    return DataError(
        f"{where} is damaged ({what}). The CSV is an index of the run folders under "
        f"{Path(path).with_suffix('')}/: run `ragrepro check --repair` (add --results-dir "
        f"for a results folder other than the default) to rebuild it from them, then rerun "
        f"the same command.")


def read_csv_text(path: Path) -> str:
    """The text of an experiment's CSV index; undecodable bytes or NUL raise `csv_damaged`
    naming the line."""
    data = Path(path).read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise csv_damaged(path, f"binary data: not valid UTF-8 at byte {e.start}",
                          data[: e.start].count(b"\n") + 1) from e
    if "\x00" in text:
        raise csv_damaged(path, "binary data: a NUL byte",
                          text[: text.index("\x00")].count("\n") + 1)
    return text
