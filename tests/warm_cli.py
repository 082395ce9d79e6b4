"""`python -m ragrepro ...` for the suite, started from a warm interpreter.

Why: most reliability tests run the CLI many times on `core/smoke` (no model). A fresh
interpreter spent about 2 of a smoke run's 2.9 seconds importing torch, Hydra and the project
before the run started (measured with `-X importtime`), and about 0.5 s tearing down. Here one
server per pytest worker imports what `python -m ragrepro` imports, once, and forks a child
for each command. The child is a real process of its own (its own pid, environment, working
directory, umask and file descriptors; SIGKILL, exit codes and `/proc` behave as for
`subprocess`), and it ends as the interpreter's exit does, less the final teardown
(non-daemon threads joined, atexit handlers run, streams flushed). What it shares with its
siblings is only the modules imported before the fork and the hash seed.

The server never runs torch code before forking (no OpenMP pool exists yet, so the children's
thread pools start clean) and reads no project setting at import: ragrepro reads its
environment (RAGREPRO_RESULTS, RAGREPRO_FAULT, ...) when a command runs (a test in
tests/core/test_warm_cli.py checks it).

In a session that runs the slow tests the server also imports transformers and the embedded
architectures (`MODEL_IMPORTS`, about 2 s of every real-model command). transformers and
huggingface_hub read some environment when imported (HF_HUB_OFFLINE, HF_HOME, ...): a command
whose values of those differ from the server's re-executes itself as `python -m ragrepro`
before it runs, so it never sees the server's.

RAGREPRO_TEST_FRESH_CLI=1 makes every call a plain `subprocess` of `python -m ragrepro`
instead, to check that a test does not depend on the warm start.

Protocol: the server listens on a Unix socket; a request is one JSON line (args, env, cwd,
umask, output paths); the server forks a supervisor, which forks the command, writes
`{"pid": n}`, waits, and writes `{"returncode": n}` (negative: killed by that signal).
"""
from __future__ import annotations

import atexit
import gc
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

FRESH_ENV = "RAGREPRO_TEST_FRESH_CLI"
# What `python -m ragrepro` imports before its first run: the CLI and the runner (torch).
WARM_IMPORTS = ("ragrepro.cli", "ragrepro.runner")
# What a command that loads an embedded model imports besides (about 2 s of a real-model
# command): transformers' auto classes, the five embedded architectures (SmolLM2 is a Llama,
# Gemma 3, Qwen2.5, the tiny T5, MiniLM's BERT), the tokenizer backends and the methods'
# pipelines. Only when the session runs the slow tests (`PRELOAD_MODELS`, set by
# tests/conftest.py): the fast ones rarely load a model and would pay it per worker.
MODEL_IMPORTS = (
    "transformers", "transformers.modeling_utils", "transformers.models.auto.modeling_auto",
    "transformers.models.auto.tokenization_auto", "transformers.tokenization_utils_tokenizers",
    "transformers.models.llama.modeling_llama", "transformers.models.gemma3.modeling_gemma3",
    "transformers.models.gemma.tokenization_gemma", "transformers.models.qwen2.modeling_qwen2",
    "transformers.models.t5.modeling_t5", "transformers.models.bert.modeling_bert",
    "ragrepro.models.lm", "ralm.lm_eval", "riches.pipeline", "filco.pipeline")
PRELOAD_MODELS = False


def runs_slow_tests(markexpr: str) -> bool:
    """Whether a session's `-m` expression keeps the slow tests (`make test`), not drops them
    (`make test-fast`: "not slow and ...")."""
    return "not slow" not in " ".join(markexpr.split())


# Environment that transformers and huggingface_hub read when imported (offline mode, cache
# folders, verbosity, the frameworks to use): a command whose value of one of these differs
# from the server's is run by a fresh interpreter instead (`_import_time_env`).
IMPORT_TIME_ENV_PREFIXES = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "USE_",
                            "XDG_", "TORCH_", "DISABLE_TELEMETRY")


def _import_time_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME_ENV_PREFIXES)}


# -- the server (runs in its own interpreter) ------------------------------------------------
def _serve(sock_path: str, models: bool) -> dict[str, Any]:
    """Import, then fork one supervisor per request; returns only in a command's child."""
    import importlib

    for name in WARM_IMPORTS + (MODEL_IMPORTS if models else ()):
        importlib.import_module(name)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path)
    srv.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # supervisors are reaped by the kernel
    # imported objects go to the permanent generation: a child's collections never walk (and
    # so never copy-on-write) the pages they share with the server
    gc.collect()
    gc.freeze()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while True:
        conn, _ = srv.accept()
        if os.fork() != 0:
            conn.close()
            continue
        srv.close()
        req = _supervise(conn)
        if req is not None:
            return req  # the command's process


def _supervise(conn: socket.socket) -> dict[str, Any] | None:
    """In the supervisor: read the request, fork the command, report its pid and status."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    req = json.loads(conn.makefile("r", encoding="utf-8").readline())
    pid = os.fork()
    if pid == 0:
        conn.close()
        return req
    conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    try:
        conn.sendall((json.dumps({"returncode": code}) + "\n").encode())
    finally:
        os._exit(0)


def _become_command(req: dict[str, Any]) -> None:
    """In the command's process: take the request's process state, then run the CLI as
    `python -m ragrepro` would (sys.path[0] is the working directory)."""
    import runpy

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.chdir(req["cwd"])
    server_env = _import_time_env(dict(os.environ))
    os.environ.clear()
    os.environ.update(req["env"])
    if req.get("umask") is not None:
        os.umask(req["umask"])
    stdin = os.open(os.devnull, os.O_RDONLY)
    out = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err = out if req["stderr"] == req["stdout"] else os.open(
        req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for src, dst in ((stdin, 0), (out, 1), (err, 2)):
        os.dup2(src, dst)
    if "transformers" in sys.modules and _import_time_env(req["env"]) != server_env:
        # transformers was imported with the server's values of these: start afresh, in this
        # very process (pid, descriptors, cwd and umask already the command's)
        os.execv(sys.executable, [sys.executable, "-m", "ragrepro", *req["args"]])
    sys.argv = ["-m", *req["args"]]
    sys.path.insert(0, os.getcwd())
    code: int = 0
    try:
        runpy.run_module("ragrepro", run_name="__main__", alter_sys=True)
    except SystemExit as e:  # as the interpreter treats an uncaught one
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - reported as the interpreter reports it
        sys.excepthook(*sys.exc_info())
        code = 1
    # The interpreter's exit less its final teardown: non-daemon threads are joined, atexit
    # handlers run (logging.shutdown among them), the streams are flushed. Freeing every
    # inherited object would write to (so copy) the server's whole heap: about 0.5 s a
    # command (measured: a smoke run 1.2 s with it, 0.7 s without; 2.9 s fresh).
    threading._shutdown()  # waits for non-daemon threads, as the interpreter's exit does
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


# -- the client (in the pytest worker) ------------------------------------------------------
class _Server:
    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="warm_cli_"))
        self.sock = str(self.dir / "s")
        flags = ["--models"] if PRELOAD_MODELS else []
        self.proc = subprocess.Popen([sys.executable, __file__, self.sock, *flags],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=Path(__file__).resolve().parents[1])
        line = self.proc.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"the warm CLI server did not start: {self.proc.stderr.read()}")
        self.count = 0
        atexit.register(self.close)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def paths(self) -> tuple[str, str]:
        self.count += 1
        return (str(self.dir / f"{self.count}.out"), str(self.dir / f"{self.count}.err"))


_SERVER: _Server | None = None
_LOCK = threading.Lock()


def _server() -> _Server:
    global _SERVER
    with _LOCK:
        if _SERVER is None or _SERVER.proc.poll() is not None:
            _SERVER = _Server()
        return _SERVER


class WarmProcess:
    """A started command, with the parts of `subprocess.Popen` the tests use."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str | os.PathLike,
                 umask: int | None, merge: bool):
        srv = _server()
        self.args = ["-m", "ragrepro", *args]
        self._out, err = srv.paths()
        self._err = self._out if merge else err
        req = {"args": list(args), "env": dict(env), "cwd": str(cwd), "umask": umask,
               "stdout": self._out, "stderr": self._err}
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._conn.connect(srv.sock)
        self._conn.sendall((json.dumps(req) + "\n").encode())
        self._buf = b""
        self.pid = self._message(None)["pid"]
        self.returncode: int | None = None

    def _message(self, timeout: float | None) -> dict[str, Any] | None:
        """The server's next JSON line; None if none came within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not select.select([self._conn], [], [], left)[0]:
                return None
            chunk = self._conn.recv(4096)
            if not chunk:
                raise RuntimeError(f"the warm CLI server dropped the command {self.args}")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def poll(self) -> int | None:
        try:
            return self.wait(0)
        except subprocess.TimeoutExpired:
            return None

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            msg = self._message(timeout)
            if msg is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self.returncode = msg["returncode"]
            self._conn.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def outputs(self) -> tuple[str, str | None]:
        out = Path(self._out).read_text(encoding="utf-8", errors="replace")
        err = None if self._err == self._out else Path(self._err).read_text(
            encoding="utf-8", errors="replace")
        return out, err

    def communicate(self, timeout: float | None = None) -> tuple[str, str | None]:
        try:
            self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            self.wait()
            raise
        return self.outputs()


def start(args: list[str], *, env: dict[str, str] | None = None,
          cwd: str | os.PathLike | None = None, umask: int | None = None,
          merge_stderr: bool = False) -> WarmProcess | subprocess.Popen:
    """`python -m ragrepro *args`, started; stdout and stderr are text (merged if asked)."""
    env = dict(os.environ if env is None else env)
    cwd = os.getcwd() if cwd is None else cwd
    if os.environ.get(FRESH_ENV) == "1":
        return subprocess.Popen([sys.executable, "-m", "ragrepro", *args], env=env, cwd=cwd,
                                stdout=subprocess.PIPE, text=True,
                                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                                umask=-1 if umask is None else umask)
    return WarmProcess(args, env, cwd, umask, merge_stderr)


def run(args: list[str], *, env: dict[str, str] | None = None,
        cwd: str | os.PathLike | None = None, timeout: float | None = None,
        umask: int | None = None) -> subprocess.CompletedProcess:
    """`subprocess.run([python, -m, ragrepro, *args], capture_output=True, text=True,
    check=False)`, from the warm server."""
    proc = start(args, env=env, cwd=cwd, umask=umask)
    out, err = proc.communicate(timeout=timeout)
    return subprocess.CompletedProcess(["-m", "ragrepro", *args], proc.returncode, out, err)


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder: each command puts its working directory first
    _become_command(_serve(sys.argv[1], models=sys.argv[2:] == ["--models"]))
