"""Cells of one sweep run in side-by-side lanes: one process per lane, the cores split.

A lane is a list of sweeps (Hydra override sets) run one after another in one process each;
the lanes run at the same time. On a 2-core CPU two one-thread processes do more work per
second than one two-thread process (SmolLM2's forward pass: 12.7 s at one thread, 7.6 s at
two, so two lanes do 1.2x the work), and a forward pass gives the same bits at one thread
and at two (tests/core/test_lanes.py checks both embedded models), so the numbers do not
change (training is another matter: ralm.reranker fixes its thread count). Results go where a plain sweep puts them; a cell a lane finished is
skipped by a rerun, and a second process needing a model another lane is building waits for
it (ragrepro.io.locked).
"""
from __future__ import annotations

import itertools
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .errors import ConfigError

log = logging.getLogger(__name__)

Sweep = Mapping[str, str]  # override key -> comma-separated values, as on the command line


def cells(params: Sweep) -> set[tuple[tuple[str, str], ...]]:
    """Every cell of a sweep: one (key, value) per key, keys sorted."""
    keys = sorted(params)
    values = [[v.strip() for v in str(params[k]).split(",")] for k in keys]
    return {tuple(zip(keys, combo)) for combo in itertools.product(*values)}


def check_cover(sweep: Sweep, lanes: Sequence[Sequence[Sweep]]) -> None:
    """The lanes run every cell of the sweep exactly once, or a ConfigError names the cells."""
    want = cells(sweep)
    got: list[tuple[tuple[str, str], ...]] = []
    for lane in lanes:
        for s in lane:
            if sorted(s) != sorted(sweep):
                raise ConfigError(f"A lane sweeps {sorted(s)}, the experiment {sorted(sweep)}: "
                                  "give every lane sweep the experiment's keys.")
            got += sorted(cells(s))
    twice = sorted({c for c in got if got.count(c) > 1})
    missing, extra = sorted(want - set(got)), sorted(set(got) - want)
    if twice or missing or extra:
        def fmt(cs):
            return "; ".join(" ".join(f"{k}={v}" for k, v in c) for c in cs)
        raise ConfigError("The lanes do not match the experiment's sweep"
                          + (f"; missing: {fmt(missing)}" if missing else "")
                          + (f"; not in the sweep: {fmt(extra)}" if extra else "")
                          + (f"; twice: {fmt(twice)}" if twice else "")
                          + ". Update the lanes or run with one lane.")


@dataclass(frozen=True)
class Lane:
    name: str
    commands: tuple[tuple[str, ...], ...]


def lane_commands(prefix: Sequence[str], experiment: str, lanes: Sequence[Sequence[Sweep]],
                  extra: Sequence[str] = (), stamp: str = "") -> list[Lane]:
    """One `ragrepro -m` command per sweep; each gets its own Hydra sweep folder, as two
    processes started in one second would otherwise write the same numbered job folders."""
    out = []
    for i, lane in enumerate(lanes, 1):
        cmds = []
        for j, s in enumerate(lane, 1):
            over = [f"{k}={v}" for k, v in s.items()]
            folder = f"hydra.sweep.dir=.cache/hydra/multirun/{experiment}/{stamp}lane{i}-{j}"
            cmds.append((*prefix, "-m", f"experiment={experiment}", *over, *extra, folder))
        out.append(Lane(f"lane {i}", tuple(cmds)))
    return out


def _forward(stream: IO[bytes], name: str, sink: IO[str], log_file: IO[str]) -> None:
    # bytes, split on \n only: a progress bar rewrites its line with \r, and the forwarded
    # copy keeps the last state of each line (text mode would make every \r a new line)
    for raw in stream:
        line = raw.decode("utf-8", errors="replace")
        log_file.write(line)
        log_file.flush()
        last = line.rstrip("\n").split("\r")[-1]
        if last.strip():
            sink.write(f"[{name}] {last}\n")
            sink.flush()


def _run_lane(lane: Lane, env: dict[str, str], log_path: Path, codes: dict[str, int],
              cwd: Path | None) -> None:
    with open(log_path, "w", encoding="utf-8", newline="") as log_file:
        for cmd in lane.commands:
            log_file.write("$ " + " ".join(cmd) + "\n")
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT)
            assert proc.stdout is not None
            _forward(proc.stdout, lane.name, sys.stderr, log_file)
            codes[lane.name] = proc.wait()
            if codes[lane.name] != 0:
                return


def run_lanes(lanes: Sequence[Lane], log_dir: Path, threads: int | None = 1,
              cwd: Path | None = None) -> dict[str, int]:
    """Run the lanes side by side (each `threads` torch threads; None: torch's default);
    every lane's output goes to stderr prefixed with its name and in full to
    log_dir/<lane>.log. Returns each lane's exit status (the first failing command's, else 0)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if threads is not None:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    codes: dict[str, int] = {}
    workers = []
    for lane in lanes:
        path = log_dir / f"{lane.name.replace(' ', '')}.log"
        log.info("%s: %d sweep(s), log %s", lane.name, len(lane.commands), path)
        t = threading.Thread(target=_run_lane, args=(lane, env, path, codes, cwd))
        t.start()
        workers.append(t)
    for t in workers:
        t.join()
    return codes
