"""File I/O with errors that name the file and line, and writes that never half-land."""
from __future__ import annotations

import contextlib
import csv
import errno
import fcntl
import gzip
import io
import json
import logging
import os
import shutil
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


# errnos of a write refused by permissions or a read-only filesystem (not a full disk)
NOT_WRITABLE = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


def not_writable_error(path: Path, e: OSError) -> RagreproError:
    """A write refused mid-run (the folder turned read-only, its owner changed)."""
    return RagreproError(f"Could not write {path}: {e.strerror}. The work so far is kept "
                         f"there; make {Path(path).parent} writable again and rerun the same "
                         f"command: it resumes (or copy the results to a writable place and "
                         f"rerun with results_dir=<that path>).")


def _write_error(path: Path, e: OSError) -> RagreproError | None:
    if e.errno == errno.ENOSPC:
        return disk_full_error(path, e)
    if e.errno in NOT_WRITABLE:
        return not_writable_error(path, e)
    return None


def _raise_write_error(path: Path, e: OSError) -> None:
    """Raise the user error for a failed write (full disk, no permission), else `e` itself."""
    error = _write_error(path, e)
    if error is None:
        raise e
    raise error from e


def _read_umask() -> int:
    """The process umask, read without changing it: os.umask can only be read by setting it,
    which would let another thread create a file under the wrong mask meanwhile."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return _UMASK_AT_IMPORT  # no /proc (not Linux, or Linux < 4.7)


def _umask_by_swap() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# Read once while importing (before this module starts any thread), for systems without /proc.
_UMASK_AT_IMPORT = _umask_by_swap()


def file_mode() -> int:
    """The mode a plain open() would give a new file under the current umask."""
    return 0o666 & ~_read_umask()


def atomic_write_text(path: str | Path, text: str) -> None:
    """atomic_write_bytes of the text in UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_gzip(path: str | Path, text: str) -> None:
    """The text in UTF-8, gzip'd with time 0 (the same text gives the same bytes: committed
    evidence files diff clean), written through atomic_write_bytes."""
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        gz.write(text.encode("utf-8"))
    atomic_write_bytes(path, buf.getvalue())


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write to a temporary file in the same folder, then rename: readers never see half a file.
    The file gets the mode a plain open() would (mkstemp's is 0600 whatever the umask), so a
    results folder on a shared filesystem stays readable by the group the umask allows."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as e:
        _raise_write_error(path, e)
    try:
        os.fchmod(fd, file_mode())
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        _raise_write_error(path, e)


def check_writable(paths: list[Path], root: Path) -> None:
    """Refuse a run, before anything loads, when one of `paths` (folders or files, existing
    or not yet) cannot be written: a file must open for appending, a folder must take a new
    file; a path not there yet is judged by its nearest existing folder."""
    seen: set[Path] = set()
    for path in paths:
        path = Path(path)
        while not path.exists() and path != path.parent:
            path = path.parent
        if path in seen:
            continue
        seen.add(path)
        try:
            _probe(path)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise disk_full_error(path, e) from e
            if e.errno not in NOT_WRITABLE:
                raise
            raise RagreproError(
                f"The results folder is not writable: {path} ({e.strerror}). Nothing was "
                f"run. Give a writable folder: results_dir=<writable path> (or the "
                f"environment variable RAGREPRO_RESULTS; now {root}), or make {path} "
                f"writable.") from e


def _probe(path: Path) -> None:
    if path.is_dir():
        fd, tmp = tempfile.mkstemp(dir=path, prefix=".ragrepro-probe-")
        try:
            os.write(fd, b"x")
        finally:
            os.close(fd)
            os.unlink(tmp)
    else:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False,
                                       default=str) + "\n")


@contextlib.contextmanager
def locked(path: str | Path, waiting: str | None = None) -> Iterator[None]:
    """An exclusive advisory lock on `path`.lock, for appends from parallel jobs. With
    `waiting`, that line is logged when another process holds the lock (the wait may be long:
    a model another process is building)."""
    lock_path = Path(str(path) + ".lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting:
                logging.getLogger(__name__).info("%s", waiting)
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
        _raise_write_error(path, e)


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


def private_tmp(dest: str | Path) -> Path:
    """A build folder beside `dest` that only this process uses (`<dest>.tmp<pid>`): two
    processes building one cache entry at once never remove each other's half-built copy."""
    dest = Path(dest)
    return dest.with_name(f"{dest.name}.tmp{os.getpid()}")


def publish_dir(tmp: str | Path, dest: str | Path, complete: str | None = None) -> bool:
    """Put the finished folder `tmp` at `dest` with one rename; False when another process's
    copy stays there instead (tmp is then removed). With `complete` (a file a finished entry
    holds), a finished entry already at dest is kept, as every writer of one cache key builds
    the same thing; without it dest is replaced (a rebuild of a stale entry). A writer that
    loses the rename to another one keeps the other's copy."""
    tmp, dest = Path(tmp), Path(dest)
    if complete is not None and (dest / complete).exists():
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    shutil.rmtree(dest, ignore_errors=True)
    try:
        os.replace(tmp, dest)
    except OSError:  # another writer renamed its copy there since: a non-empty folder stays
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return True
