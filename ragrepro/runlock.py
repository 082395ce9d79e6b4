"""One writer per run: a lock file next to the run folder, held from `Run.start` until after
`Run.commit` (docs/reliability.md, "One writer per run").

`results/<experiment>/<run_id>.writer` holds one JSON object {host, pid, pid_start,
started_at, heartbeat_at, run_id, command}. It is created whole in one step: the record is
written to a private temporary file, which is then hard-linked to the lock's name; `link`
fails if the name exists, on NFS too (where O_EXCL was not atomic before NFSv3). A heartbeat
thread rewrites `heartbeat_at` (and so the file's mtime) every `writer.heartbeat_s` seconds.

A second copy of the run finds the file and judges its holder:
- live: it skips the run (or waits up to `writer.wait_s` seconds for the holder to finish);
- dead: the holder's pid is gone on this same host: taken over at once;
- stale: no sign of life (heartbeat_at, or the file's mtime) for `writer.stale_s` seconds:
  taken over, whatever the host. Hosts must agree on the time to within a fraction of the
  stale time (NTP); the newer of heartbeat_at (the holder's clock) and mtime (the file
  server's clock) counts, so one clock running late cannot make a live holder look stale.

Two contenders for one takeover are told apart by a second file created the same way,
`<run_id>.writer.takeover`: only its creator removes the old lock (after checking that it is
unchanged since it was judged) and creates its own; the others see a takeover in progress.

Hand-written rather than filelock's: `SoftFileLock` has no heartbeat and no stale rule, and
`SoftFileLease` (filelock >= 3.30, which this project does not pin; it arrives through
huggingface_hub) measures expiry on the contender's own clock, so a rerun after a node died
would have to watch the lock for the whole stale time before taking it over, and its marker
is not the readable record a user needs to see who holds a run.
"""
from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import shlex
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .errors import ConfigError, RagreproError
from .io import NOT_WRITABLE, check_writable
from .tracking import Run, scrub_secrets

log = logging.getLogger(__name__)

SUFFIX = ".writer"
TAKEOVER = ".takeover"
POLL_S = 1.0  # how often a waiting copy looks at the lock again
_RACE_TRIES = 50  # re-reads while the lock changes under us (another copy acting right now)
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK}


@dataclass(frozen=True)
class WriterSettings:
    """The `writer:` node of conf/config.yaml (ranges in ragrepro.validate.Writer)."""

    wait_s: float = 0.0
    heartbeat_s: float = 30.0
    stale_s: float = 300.0

    @classmethod
    def of(cls, node: Mapping[str, Any] | None) -> WriterSettings:
        node = dict(node or {})
        out = cls(float(node.get("wait_s", cls.wait_s)),
                  float(node.get("heartbeat_s", cls.heartbeat_s)),
                  float(node.get("stale_s", cls.stale_s)))
        # a holder that misses one beat (a slow filesystem) must not look stale yet
        if out.stale_s < 2 * out.heartbeat_s:
            raise ConfigError(f"writer.stale_s={out.stale_s:g} must be at least twice "
                              f"writer.heartbeat_s={out.heartbeat_s:g}: a writer that missed "
                              f"one heartbeat would be taken over. Raise writer.stale_s "
                              f"(default 300) or lower writer.heartbeat_s (default 30).")
        return out


def lock_path(run: Run) -> Path:
    """`results/<experiment>/<run_id>.writer`: a file, so the report's run readers (folders
    holding metrics.json) and the `tmp_` rules never see it."""
    return run.root / run.experiment / f"{run.run_id}{SUFFIX}"


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="milliseconds")


def _epoch(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text)).timestamp()
    except (TypeError, ValueError):
        return None


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks) of a process, from /proc; None where unreadable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], fields[19]
    except (OSError, IndexError):
        return None


def pid_alive(pid: int, start: str | None = None) -> bool:
    """Whether `pid` runs on this host and, when its start time is known, is still the same
    process (a pid reused since is not the holder). A zombie counts as dead: in a container
    whose init does not reap, a SIGKILLed process stays one."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, it belongs to another user
    stat = _proc_stat(pid)
    if stat is None:
        return True  # no /proc (not Linux): the signal test is all there is
    state, started = stat
    return state not in ("Z", "X") and (start is None or start == started)


@dataclass(frozen=True)
class Holder:
    """A lock file as read: its record (empty when unreadable) and its file identity."""

    path: Path
    record: dict[str, Any]
    raw: bytes
    ino: int
    mtime: float

    @property
    def host(self) -> str:
        return str(self.record.get("host") or "?")

    @property
    def pid(self) -> int:
        try:
            return int(self.record.get("pid") or 0)
        except (TypeError, ValueError):
            return 0

    def last_sign(self) -> float:
        """The latest sign of life: heartbeat_at or the file's mtime, whichever is newer."""
        beat = _epoch(self.record.get("heartbeat_at"))
        return max(self.mtime, beat if beat is not None else self.mtime)

    def describe(self) -> str:
        since = self.record.get("started_at") or "an unknown time"
        return f"host {self.host} pid {self.pid or '?'} since {since}"


def _read(path: Path) -> Holder | None:
    """The lock file's holder, or None when there is no lock file. A record caught half
    rewritten by a heartbeat is read again; one that stays unreadable (edited by hand) is
    judged by its mtime alone."""
    for attempt in range(3):
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                raw = f.read()
        except FileNotFoundError:
            return None
        try:
            record = json.loads(raw.decode("ascii"))
            if isinstance(record, dict):
                return Holder(path, record, raw, st.st_ino, st.st_mtime)
        except (UnicodeDecodeError, json.JSONDecodeError):
            pass
        if attempt < 2:
            time.sleep(0.05)
    return Holder(path, {}, raw, st.st_ino, st.st_mtime)


def _link_new(path: Path, data: bytes) -> int | None:
    """Create `path` holding `data`, in one step, if it does not exist; returns a descriptor
    open on it (for the heartbeat), or None when the name is taken. The mode follows the umask."""
    tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}."
                         f"{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
    linked = no_links = False
    try:
        os.write(fd, data)
        os.fsync(fd)
        try:
            os.link(tmp, path)
            linked = True
        except FileExistsError:
            pass
        except OSError as e:
            if os.fstat(fd).st_nlink == 2:  # NFS: a lost reply to a link that was made
                linked = True
            elif e.errno in _NO_HARD_LINKS:
                no_links = True
            else:
                raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if not linked:
            os.close(fd)
    if linked:
        return fd
    return _exclusive_new(path, data) if no_links else None  # no hard links here: O_EXCL


def _exclusive_new(path: Path, data: bytes) -> int | None:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o666)
    except FileExistsError:
        return None
    os.write(fd, data)
    os.fsync(fd)
    return fd


def _redacted_command(argv: list[str]) -> str:
    """The command line with credential-like `key=value` overrides hidden."""
    out = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if eq:
            shown = scrub_secrets({key.rsplit(".", 1)[-1].lstrip("+~"): value})
            value = next(iter(shown.values()))
        out.append(shlex.quote(f"{key}{eq}{value}" if eq else arg))
    return " ".join(out)


class WriterLock:
    """The lock of one run folder. `acquire` returns None once this process holds it, or
    the live holder that keeps it; `release` gives it up (only if it is still ours)."""

    def __init__(self, path: Path, run_name: str, settings: WriterSettings,
                 command: str | None = None, clock: Callable[[], float] = time.time):
        self.path = Path(path)
        self.run_name = run_name
        self.settings = settings
        self.clock = clock
        self.host = socket.gethostname()
        self.command = _redacted_command(sys.argv) if command is None else command
        self._fd: int | None = None
        self._size = 0
        self._record: dict[str, Any] = {}
        self._io = threading.Lock()  # a heartbeat never writes while release closes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lost_reported = False

    @property
    def takeover_path(self) -> Path:
        return self.path.with_name(self.path.name + TAKEOVER)

    # -- acquiring -----------------------------------------------------------------------
    def acquire(self) -> Holder | None:
        """Take the lock: at once if free, dead or stale, else poll up to settings.wait_s."""
        deadline = time.monotonic() + self.settings.wait_s
        tries = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            if self._create(self.path):
                return None
            holder = _read(self.path)
            if holder is None:  # released meanwhile: try again at once
                tries += 1
            else:
                verdict = self.verdict(holder)
                if verdict == "live":
                    if time.monotonic() >= deadline:
                        return holder
                    time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))
                    continue
                taken = self._take_over(holder, verdict)
                if taken is None:
                    return None
                if taken is not holder and time.monotonic() >= deadline:
                    return taken  # another copy is taking it over right now
                tries += 1
                time.sleep(0.05)
            if tries > _RACE_TRIES:
                raise RagreproError(
                    f"Could not take the writer lock {self.path} of run {self.run_name}: it "
                    f"kept changing while this process looked ({_RACE_TRIES} tries). Another "
                    f"copy of this run is starting right now; rerun later.")

    def verdict(self, holder: Holder) -> str:
        """live, dead (its pid is gone on this host) or stale (no sign of life for stale_s)."""
        if holder.host == self.host and holder.pid and not pid_alive(
                holder.pid, holder.record.get("pid_start")):
            return "dead"
        age = self.clock() - holder.last_sign()
        return "stale" if age > self.settings.stale_s else "live"

    def _take_over(self, holder: Holder, verdict: str) -> Holder | None:
        """Replace a dead or stale lock. None: this process holds the lock now; otherwise the
        holder to report: `holder` itself if the lock changed meanwhile (judge it again), or
        the takeover file of another copy that is replacing it right now."""
        guard = self.takeover_path
        if not self._create(guard, keep=False):
            other = _read(guard)
            if other is not None and self.verdict(other) != "live":
                self._remove_if_unchanged(other)  # its creator died mid-takeover
                return holder
            return other or holder
        try:
            now = _read(self.path)
            if now is None or (now.ino, now.raw) != (holder.ino, holder.raw):
                return holder  # refreshed or replaced since it was judged
            os.unlink(self.path)
            if not self._create(self.path):
                return holder  # a copy arriving just now created it: it is theirs
        finally:
            with contextlib.suppress(OSError):
                os.unlink(guard)
        why = ("its process is gone" if verdict == "dead" else
               f"it has shown no sign of life for {self.clock() - holder.last_sign():.0f} s "
               f"(writer.stale_s={self.settings.stale_s:g})")
        log.warning("Taking over run %s from %s (lock file %s): %s. Its unfinished work, if "
                    "any, is resumed.", self.run_name, holder.describe(), self.path, why)
        return None

    def _remove_if_unchanged(self, judged: Holder) -> None:
        """Remove a stale file only if it is still the one judged: moved aside first, so that
        a file another copy created meanwhile is put back instead of lost."""
        aside = judged.path.with_name(f".{judged.path.name}.stale.{secrets.token_hex(4)}")
        try:
            os.rename(judged.path, aside)
        except FileNotFoundError:
            return
        if os.stat(aside).st_ino != judged.ino:
            with contextlib.suppress(FileExistsError):
                os.link(aside, judged.path)
        with contextlib.suppress(OSError):
            os.unlink(aside)

    def _create(self, path: Path, keep: bool = True) -> bool:
        now = _iso(self.clock())
        stat = _proc_stat(os.getpid())
        record = {"host": self.host, "pid": os.getpid(), "pid_start": stat[1] if stat else None,
                  "started_at": now, "heartbeat_at": now, "run_id": self.run_name,
                  "command": self.command}
        data = self._encode(record, 0)
        fd = _link_new(path, data)
        if fd is None:
            return False
        if not keep:
            os.close(fd)
            return True
        self._fd, self._record, self._size = fd, record, len(data)
        self._stop.clear()
        self._thread = threading.Thread(target=self._beat, daemon=True,
                                        name=f"ragrepro-writer-{self.path.name}")
        self._thread.start()
        return True

    @staticmethod
    def _encode(record: dict[str, Any], size: int) -> bytes:
        """ASCII JSON padded to `size` bytes: a rewrite never leaves a stale tail behind."""
        body = json.dumps(record, ensure_ascii=True)
        return (body.ljust(size - 1) + "\n").encode("ascii")

    # -- holding -------------------------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.settings.heartbeat_s):
            try:
                self.refresh()
            except OSError as e:  # e.g. the folder turned read-only: the run reports it
                log.warning("Could not refresh the writer lock %s (%s); another copy may take "
                            "the run over after writer.stale_s.", self.path, e)

    def refresh(self) -> None:
        """Rewrite heartbeat_at in place (the same inode, so a lock taken over from us is
        never overwritten: our writes land in the old, unlinked file)."""
        with self._io:
            if self._fd is None:
                return
            self._record["heartbeat_at"] = _iso(self.clock())
            data = self._encode(self._record, self._size)
            os.pwrite(self._fd, data, 0)
            os.fsync(self._fd)
            self._size = len(data)
        if not self.still_held() and not self._lost_reported:
            self._lost_reported = True
            log.error("The writer lock %s of run %s was taken over by another copy (this "
                      "process's heartbeat stalled for more than writer.stale_s=%g s); this "
                      "process will not commit the run.", self.path, self.run_name,
                      self.settings.stale_s)

    def still_held(self) -> bool:
        if self._fd is None:
            return False
        try:
            return os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
        except FileNotFoundError:
            return False

    def check_held(self) -> None:
        """Refuse to commit after losing the lock: the copy that took it over commits."""
        if self.still_held():
            return
        now = _read(self.path)
        by = now.describe() if now is not None else "a copy that has already finished"
        raise RagreproError(
            f"Run {self.run_name} was taken over by {by} while this process computed it (lock "
            f"file {self.path}; this process showed no sign of life for writer.stale_s="
            f"{self.settings.stale_s:g} s). Not committing, so the other copy's results "
            f"stand; rerun later to find the run finished. Raise writer.stale_s if this "
            f"machine stalls for that long.")

    def release(self) -> None:
        """Stop the heartbeat and remove the lock file if it is still ours."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=max(10.0, self.settings.heartbeat_s))
        with self._io:
            if self._fd is None:
                return
            try:
                if self.still_held():
                    os.unlink(self.path)
            except OSError as e:  # a read-only folder: the next run here takes it over
                log.warning("Could not remove the writer lock %s (%s); the next run on this "
                            "host takes it over (its process is gone).", self.path, e)
            finally:
                os.close(self._fd)
                self._fd = None


@contextlib.contextmanager
def writing(run: Run, settings: WriterSettings) -> Iterator[WriterLock | None]:
    """Hold the run's writer lock for the body; yields None (after one message) when a live
    copy of the run holds it. The results folder is checked writable first (exit code 2)."""
    folder = run.root / run.experiment
    check_writable([folder, run.csv_path, run.work_dir, run.samples_path], run.root)
    name = f"{run.experiment}/{run.run_id}"
    lock = WriterLock(lock_path(run), name, settings)
    try:
        holder = lock.acquire()
    except OSError as e:  # the folder turned read-only since the check, or filled up
        if e.errno not in NOT_WRITABLE | {errno.ENOSPC}:
            raise
        check_writable([folder], run.root)  # raises the message naming the folder
        raise RagreproError(f"Could not create the writer lock {lock.path}: {e.strerror}. "
                            f"Give a writable results folder: results_dir=<writable "
                            f"path>.") from e
    if holder is not None:
        log.warning("Run %s is being written by %s (lock file %s); skipping. Rerun later, or "
                    "set writer.wait_s=<seconds> to wait.", name, holder.describe(), lock.path)
        yield None
        return
    try:
        yield lock
    finally:
        lock.release()
