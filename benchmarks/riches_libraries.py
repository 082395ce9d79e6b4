"""The RICHES index against the field's suffix-array libraries, on one synthetic token file:
build time and peak RSS (each build in a child process under /usr/bin/time -v), disk bytes
per token, and the query RICHES makes per decoding step: every distinct next token of a key
prefix that starts at a key start, with its count.

    python -m benchmarks.riches_libraries [N_TOKENS]   # results/bench/riches_libraries.{csv,md}

Not part of `make bench`: it needs `pip install tokengrams infini-gram` (neither is a
dependency of this project; see docs/performance.md for why), and a library that is not
installed is left out of the table.

- ours: riches/index_build.py (`--shard 0/1`): int32 suffix array; a step is `children` of
  the hypothesis's span and `narrow` by the chosen token (the span is the beam's state).
- pydivsufsort: the previous builder (sorts the text re-encoded as bytes), build only.
- tokengrams 0.3.3 (EleutherAI, MIT): `MemmapIndex.build` over the same u16 token file
  (u64 suffix table); a step is `count_next([SEP] + prefix)`: a dense vocabulary-sized list
  from which the non-zero entries are the distinct next tokens.
- infini-gram 2.6.0 (Apache-2.0 in its wheel metadata): its Rust indexer over the keys as
  documents (separator 0xFFFF, 4-byte byte pointers); a step is `ntd([0xFFFF] + prefix,
  max_support=n)` (exact: max_support above every count).
Corpus: benchmarks/riches_shards.py's synthetic keys (Zipf ids, Factoid-Wiki-like lengths).
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from riches.index_build import open_arrays, open_index, write_plan

from .common import markdown_table, write_csv
from .riches_shards import VOCAB, synthetic_folder

log = logging.getLogger(__name__)

SEP = VOCAB
IG_SEP = 0xFFFF


def _timed_child(code: str) -> tuple[float, int, str]:
    """Run `code` in a fresh interpreter: wall seconds, peak RSS bytes, stdout."""
    t0 = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", code],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t0
    if proc.returncode:
        raise RuntimeError(proc.stderr[-3000:])
    kb = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    return wall, int(kb.group(1)) * 1024 if kb else -1, proc.stdout


def build_ours(folder: Path) -> dict:
    wall, rss, _ = _timed_child(f"from riches.index_build import main; "
                                f"main([{str(folder)!r}, '--shard', '0/1'])")
    sa = folder / "shards" / "00000" / "sa.i32"
    return {"build_s": wall, "peak_rss": rss, "disk": (folder / "tokens.u16").stat().st_size
            + sa.stat().st_size + 16 * json.loads((folder / "tokens.json").read_text())["n_keys"]}


def build_divsufsort(folder: Path) -> dict:
    wall, rss, _ = _timed_child(
        "import numpy as np; from pydivsufsort import divsufsort; "
        f"t = np.fromfile({str(folder / 'tokens.u16')!r}, dtype=np.uint16); "
        "sa = divsufsort(t); print(sa.dtype)")
    return {"build_s": wall, "peak_rss": rss, "disk": float("nan")}


def build_tokengrams(folder: Path) -> dict:
    idx = folder / "tokengrams.idx"
    wall, rss, _ = _timed_child(
        "from tokengrams import MemmapIndex; "
        f"MemmapIndex.build({str(folder / 'tokens.u16')!r}, {str(idx)!r}, vocab={SEP + 1})")
    return {"build_s": wall, "peak_rss": rss,
            "disk": idx.stat().st_size + (folder / "tokens.u16").stat().st_size}


def write_infinigram_input(folder: Path, record: dict) -> Path:
    """The keys as infini-gram documents: 0xFFFF + tokens each (its tokenized.0/offset.0)."""
    out = folder / "infinigram"
    out.mkdir()
    text, starts, _ = open_arrays(folder, record)
    ig = np.array(text[:-1])  # its documents have no closing separator
    ig[ig == SEP] = IG_SEP
    ig.tofile(out / "tokenized.0")
    ((starts - 1) * 2).astype(np.uint64).tofile(out / "offset.0")
    return out


def build_infinigram(out: Path) -> dict:
    wall, rss, _ = _timed_child(
        "import argparse, infini_gram.indexing as ix; "
        f"ix.build_sa(argparse.Namespace(save_dir={str(out)!r}, temp_dir={str(out)!r}, "
        "worker_id=0, shards=1, workers=1, cpus=1, mem=2, token_width=2))")
    disk = sum((out / f).stat().st_size for f in ("tokenized.0", "table.0", "offset.0"))
    return {"build_s": wall, "peak_rss": rss, "disk": disk}


def walks(keys: list[np.ndarray], step_fn, n_max: int = 16) -> tuple[list[float], list[str]]:
    """Time step_fn(key, depth, state) -> ({token: count}, state) along each key from its
    start; the answers as digests (compared across processes)."""
    times, answers = [], []
    for key in keys:
        state = None
        for d in range(min(len(key), n_max) + 1):
            t0 = time.perf_counter()
            got, state = step_fn(key, d, state)
            times.append(time.perf_counter() - t0)
            answers.append(hashlib.sha1(json.dumps(sorted(got.items())).encode()).hexdigest())
    return times, answers


def ours_steps(folder: Path, keys: list[np.ndarray]) -> tuple[list[float], list[str]]:
    index = open_index(folder)
    start = index.key_start()
    index.children(start)

    def step(key, d, span):
        if d == 0:
            index._cache.clear()  # narrow spans' memo, per walk (wide ones stay)
            span = start
        else:
            span = index.narrow(span, int(key[d - 1]))
        return index.children(span).as_dict(), span

    return walks(keys, step)


def library_steps(name: str, folder: Path, max_support: int,
                  keys: list[np.ndarray]) -> tuple[list[float], list[str], bool]:
    """(step times, answer digests, approximate?) of one library (run in a child process:
    a library that aborts takes only its own row with it)."""
    approx = [False]
    if name == "tokengrams":
        from tokengrams import MemmapIndex  # deferred: optional, benchmark only

        tg = MemmapIndex(str(folder / "tokens.u16"), str(folder / "tokengrams.idx"), SEP + 1)

        def step(key, d, _):
            dense = np.asarray(tg.count_next([SEP] + [int(x) for x in key[:d]]))
            return {int(i): int(dense[i]) for i in np.flatnonzero(dense)}, None
    else:
        from infini_gram.engine import InfiniGramEngine  # deferred: optional, benchmark only

        # eos_token_id: the id its ntd reports for the document separator (ours: SEP)
        eng = InfiniGramEngine(index_dir=str(folder / "infinigram"), eos_token_id=SEP,
                               vocab_size=IG_SEP, version=4, token_dtype="u16")

        def step(key, d, _):
            r = eng.ntd(prompt_ids=[IG_SEP] + [int(x) for x in key[:d]],
                        max_support=max_support)
            approx[0] |= bool(r.get("approx"))
            return {int(t): int(v["cont_cnt"]) for t, v in r["result_by_token_id"].items()}, None
    t, answers = walks(keys, step)
    return t, answers, approx[0]


def _library_child(name: str, folder: Path, max_support: int, picks: Path) -> dict:
    code = ("import json, numpy as np; from pathlib import Path; "
            "from benchmarks.riches_libraries import library_steps; "
            f"keys = [np.asarray(k) for k in json.loads(Path({str(picks)!r}).read_text())]; "
            f"t, a, x = library_steps({name!r}, Path({str(folder)!r}), {max_support}, keys); "
            "print(json.dumps({'t': t, 'a': a, 'approx': x}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if proc.returncode:
        lines = proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"]
        return {"error": " ".join(lines[-2:])}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(n_tokens: int, n_walks: int = 200, workdir: str | None = None) -> list[dict]:
    have = {m for m in ("tokengrams", "infini_gram") if importlib.util.find_spec(m)}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        folder = Path(tmp)
        record = synthetic_folder(folder, n_tokens)
        write_plan(folder, record, 2**31 - 1, {})
        n = record["n_tokens"]
        builds = {"ours": build_ours(folder), "pydivsufsort": build_divsufsort(folder)}
        if "tokengrams" in have:
            builds["tokengrams"] = build_tokengrams(folder)
        if "infini_gram" in have:
            builds["infini-gram"] = build_infinigram(write_infinigram_input(folder, record))
        rng = np.random.default_rng(0)
        text, starts, _ = open_arrays(folder, record)
        # keys to walk: never the last (infini-gram's last document has no closing separator)
        pick = rng.integers(0, record["n_keys"] - 1, size=n_walks)
        keys = [np.asarray(text[starts[k]:starts[k + 1] - 1], dtype=np.int64) for k in pick]
        picks = folder / "walks.json"
        picks.write_text(json.dumps([k.tolist() for k in keys]))
        t, ref = ours_steps(folder, keys)
        queries = {"ours": {"ms_per_step_mean": 1e3 * float(np.mean(t)),
                            "ms_per_step_p50": 1e3 * float(np.median(t)), "answers_equal": True}}
        runs = [("tokengrams", n)] if "tokengrams" in have else []
        runs += [("infini-gram", n), ("infini-gram", 1000)] if "infini_gram" in have else []
        for name, support in runs:
            got = _library_child(name.replace("-", "_"), folder, support, picks)
            label = name if name == "tokengrams" else f"{name} (max_support={support:,})"
            if "error" in got:
                queries[label] = {"note": f"queries failed: {got['error']}"}
                continue
            queries[label] = {"ms_per_step_mean": 1e3 * float(np.mean(got["t"])),
                              "ms_per_step_p50": 1e3 * float(np.median(got["t"])),
                              "answers_equal": got["a"] == ref and not got["approx"],
                              "note": "approximate (sampled)" if got["approx"] else ""}
        for name, b in builds.items():
            build = {"n_tokens": n, "build_s": b["build_s"], "peak_rss_gb": b["peak_rss"] / 1e9,
                     "peak_rss_bytes_per_token": b["peak_rss"] / n,
                     "disk_bytes_per_token": b["disk"] / n}
            mine = [q for q in queries if q.split(" (")[0] == name] or [None]
            rows += [{"index": q or name, **build, **queries.get(q, {})} for q in mine]
    return rows


COLUMNS = ["index", "n_tokens", "build_s", "peak_rss_gb", "peak_rss_bytes_per_token",
           "disk_bytes_per_token", "ms_per_step_mean", "ms_per_step_p50", "answers_equal", "note"]


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    rows = compare(int(float(argv[0])) if argv else 20_000_000)
    out = results_dir() / "bench"
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "riches_libraries.csv", [{c: r.get(c) for c in COLUMNS} for r in rows])
    atomic_write_text(out / "riches_libraries.md", "\n".join([
        "# RICHES index against suffix-array libraries", "",
        ("One step = every distinct next token (with its count) of a key prefix from a key "
         "start, walking 200 random keys token by token (benchmarks/riches_libraries.py); "
         "answers_equal: the same {token: count} at every step as ours."), "",
        *markdown_table([{c: r.get(c) for c in COLUMNS} for r in rows]), ""]))
    log.info("wrote %s", out / "riches_libraries.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
