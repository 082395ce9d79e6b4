"""File I/O with errors that name the file and line, and writes that never half-land."""
from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import io
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import DataError, RagreproError


def read_text(path: str | Path) -> str:
    path = Path(path)
    if not path.exists():
        raise DataError(f"{path}: file not found. Check the path (relative paths are "
                        f"resolved from the directory you ran the command in).")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        line = path.read_bytes()[: e.start].count(b"\n") + 1
        raise DataError(f"{path}:{line}: not valid UTF-8 (byte {e.start}). Re-encode the "
                        f"file as UTF-8, e.g. `iconv -f latin1 -t utf-8`.") from e


def iter_jsonl(path: str | Path, required: tuple[str, ...] = ()) -> Iterator[dict[str, Any]]:
    """Yield one dict per non-empty line; a bad line raises DataError naming file:line."""
    for _lineno, record in iter_jsonl_numbered(path, required):
        yield record


def iter_jsonl_numbered(path: str | Path,
                        required: tuple[str, ...] = ()) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, dict) per non-empty line, for callers whose own messages name the line."""
    text = read_text(path)
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: malformed JSON ({e.msg} at column {e.colno}). "
                            f"Fix or remove that line.") from e
        if not isinstance(record, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got "
                            f"{type(record).__name__}.")
        missing = [k for k in required if k not in record]
        if missing:
            raise DataError(f"{path}:{lineno}: record lacks field(s) {missing}; every line "
                            f"needs {list(required)}.")
        yield lineno, record


def read_json(path: str | Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: malformed JSON ({e.msg}).") from e


def disk_full_error(path: Path, e: OSError) -> RagreproError:
    return RagreproError(f"Could not write {path}: disk full ({e.strerror}). Free space and "
                         f"rerun the same command: finished runs are kept and skipped.")


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if e.errno == errno.ENOSPC:
            raise disk_full_error(path, e) from e
        raise


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False,
                                       default=str) + "\n")


@contextlib.contextmanager
def locked(path: str | Path) -> Iterator[None]:
    """An exclusive advisory lock on `path`.lock, for appends from parallel jobs."""
    lock_path = Path(str(path) + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def append_line(path: str | Path, line: str) -> None:
    """Append one line durably (flush + fsync) so a killed process loses at most that line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(line.rstrip("\n") + "\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise disk_full_error(path, e) from e
        raise


def read_jsonl_tolerant(path: str | Path) -> list[dict[str, Any]]:
    """Checkpoint files: keep every complete line; a torn last line (killed mid-write) is dropped."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return out


def write_rows_csv(path: str | Path, rows: list[dict[str, Any]]) -> None:
    """Rows as CSV, atomically; the header is the union of their keys in first-seen order
    (summary rows of different runs may carry different setting columns)."""
    header: list[str] = []
    for r in rows:
        header += [k for k in r if k not in header]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header)
    writer.writeheader()
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())
