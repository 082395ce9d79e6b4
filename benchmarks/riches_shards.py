"""RICHES index in shards: build time, peak RSS and disk per token of one shard job, and the
constrained beam's step time over a 10-shard index (riches/index_build.py, index_sharded.py).

    python -m benchmarks.riches_shards [N_TOKENS] [--keep DIR]
                                                       # results/bench/riches_shards.{csv,md}

`--keep DIR` builds the one-shard index in DIR/one and leaves it there; a later run with
the same N_TOKENS reuses it (no rebuild) and reports the build row measured when it was built
(DIR/one/bench_build.json; delete DIR after changing the build code). Without it everything
lives in a temporary folder.

Corpus (synthetic, written straight into the index folder's token file, no Python lists):
token ids (Zipf(1.2) - 1) mod 49,152 (SmolLM2's vocabulary size), keys of
1 + NegativeBinomial(r=6, p=6/18.4) tokens (mean 13.4 = Factoid-Wiki's 11.2 words a
proposition x 1.2 tokens a word, sd 6.2), a separator before each key (seed 0).

Rows:
- `one shard`: the whole corpus as one shard, sorted by a child process
  (`python -m riches.index_build DIR --shard 0/1`) under /usr/bin/time -v: wall time and the
  child's peak RSS (text and suffix array are memory-mapped files; their resident pages count).
- `10 views` (large sizes): that shard opened 10 times as the 10 shards of one ShardedIndex,
  i.e. 10x the corpus with each shard's spans as wide as a real shard of this size.
- `10 shards` (small sizes, `make bench`): the corpus cut into 10 real shards.
A beam step = for each of 10 hypotheses inside a key, `KeyConstraint.allowed` (the allowed
next tokens: the shards' children merged) and `KeyConstraint.advance` (one narrowing per
shard); each hypothesis copies a random key from its start; the memo of narrow spans is cleared
before every beam, the wide spans' (>= 65,536 rows, riches/index.py WIDE_ROWS) is kept, as in a
decoding run, where every question meets the same wide spans near a key's start.
`make bench` (section `riches_shards_small`, results/bench/riches_shards_small.csv) runs 2M
tokens (env BENCH_SHARDS_TOKENS); the paper-size shard is `python -m benchmarks.riches_shards 3e8`
(results/bench/riches_shards.{csv,md}; about 10 min here at a load average of 4).
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from riches.constraint import KeyConstraint
from riches.index import SuffixIndex
from riches.index_build import (
    TokenWriter,
    finish,
    open_arrays,
    open_index,
    shard_dir,
    write_plan,
)
from riches.index_sharded import ShardedIndex
from riches.markers import MarkerSpec

from .common import (
    BenchResult,
    load_average,
    markdown_tables,
    ratio_target,
    read_rows,
    write_csv,
)

log = logging.getLogger(__name__)

VOCAB = 49152
MEAN_KEY_TOKENS = 13.4
SMALL_TOKENS = 2_000_000
BEAM = 10
MS_PER_HYP_STEP = 1.0        # the lookup target of benchmarks/riches_index.py, per hypothesis
BYTES_PER_TOKEN_PEAK = 12.0  # issue 29: one shard job's peak RSS per token


def synthetic_folder(folder: Path, n_tokens: int, seed: int = 0, vocab: int = VOCAB,
                     keys_per_chunk: int = 1 << 20) -> dict:
    """Write the corpus described in the module docstring into an index folder."""
    rng = np.random.default_rng(seed)
    writer = TokenWriter(folder, vocab)
    r = 6
    p = r / (r + MEAN_KEY_TOKENS - 1)
    while writer.n_tokens < n_tokens:
        lengths = 1 + rng.negative_binomial(r, p, size=keys_per_chunk).astype(np.int64)
        room = n_tokens - writer.n_tokens
        fit = np.searchsorted(np.cumsum(lengths + 1), room, side="right")
        lengths = lengths[:max(int(fit), 1)]
        flat = (rng.zipf(1.2, size=int(lengths.sum())) - 1) % vocab
        writer.add(lengths, flat, np.arange(writer.n_keys, writer.n_keys + len(lengths)))
    return writer.close()


def _max_rss_kb(stderr: str) -> int | None:
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", stderr)
    return int(m.group(1)) if m else None


def build_shards_in_children(folder: Path) -> list[dict]:
    """Each missing shard by its own `python -m riches.index_build` child; per shard: wall
    seconds and the child's peak RSS (/usr/bin/time -v, else the child's own getrusage)."""
    plan = json.loads((folder / "build.json").read_text())
    n = len(plan["shards"])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    timer = ["/usr/bin/time", "-v"] if Path("/usr/bin/time").exists() else []
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        proc = subprocess.run([*timer, sys.executable, "-m", "riches.index_build", str(folder),
                               "--shard", f"{i}/{n}"], env=env, capture_output=True, text=True,
                              check=False)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise RuntimeError(f"shard {i} build failed:\n{proc.stderr[-3000:]}")
        done = json.loads((shard_dir(folder, i) / "done.json").read_text())
        kb = _max_rss_kb(proc.stderr)
        out.append({"shard": i, "n_tokens": done["n_tokens"], "wall_s": wall,
                    "sort_s": done["seconds"],
                    "peak_rss_bytes": kb * 1024 if kb else done["peak_rss_bytes"]})
    finish(folder)
    return out


def views(folder: Path, k: int) -> ShardedIndex:
    """The one-shard index in `folder` opened k times as the k shards of one index."""
    meta = json.loads((folder / "meta.json").read_text())
    text, starts, docs = open_arrays(folder, meta)
    sa = np.memmap(shard_dir(folder, 0) / "sa.i32", dtype=np.int32, mode="r")
    return ShardedIndex([SuffixIndex(text, sa, starts, docs, meta["sep"]) for _ in range(k)],
                        k * meta["n_tokens"], {"n_keys": k * meta["n_keys"]})


def _clear(index: Any) -> None:
    """Empty the memo of narrow spans (the wide ones stay: riches/index.py, WIDE_ROWS)."""
    for sh in index.shards if isinstance(index, ShardedIndex) else [index]:
        sh._cache.clear()
    if isinstance(index, ShardedIndex):
        index._cache.clear()


def beam_steps(index: Any, n_beams: int = 30, beam: int = BEAM, max_steps: int = 16,
               seed: int = 0) -> dict[str, float]:
    """Time KeyConstraint.allowed + advance for `beam` hypotheses per step, each copying a
    random key from its start (narrow spans' memo cleared per beam, wide spans' kept)."""
    rng = np.random.default_rng(seed)
    spec = MarkerSpec((VOCAB - 2,), (VOCAB - 1,))  # two rare ids of the Zipf tail
    c = KeyConstraint(index=index, spec=spec, vocab_size=VOCAB, start="key", end="key",
                      start_at_word=False)
    n_keys = int(index.meta.get("n_keys", 0)) or len(getattr(index, "key_starts", []))
    opened = c.advance(c.initial(), spec.open[0])
    c.allowed(opened)  # the key-start children, once per index as in decoding
    step_ms: list[float] = []
    distinct: list[int] = []
    for _ in range(n_beams):
        _clear(index)
        keys = [index.key_tokens(int(k)) for k in rng.integers(n_keys, size=beam)]
        states = [opened] * beam
        for d in range(max_steps):
            live = [i for i, k in enumerate(keys) if d < len(k)]
            if not live:
                break
            t0 = time.perf_counter()
            for i in live:
                a = c.allowed(states[i])
                distinct.append(len(a.ids))
                states[i] = c.advance(states[i], int(keys[i][d]))
            step_ms.append((time.perf_counter() - t0) * 1e3 / len(live) * beam)
    t = np.asarray(step_ms)
    return {"beam": beam, "beam_steps_timed": len(t), "ms_per_beam_step_mean": float(t.mean()),
            "ms_per_beam_step_p50": float(np.median(t)),
            "ms_per_beam_step_p95": float(np.percentile(t, 95)),
            "ms_per_hyp_step_mean": float(t.mean()) / beam,
            "allowed_mean": float(np.mean(distinct))}


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


BUILT = "bench_build.json"  # --keep: the build row measured when the kept folder was built


def one_shard(tmp: Path, n_tokens: int, keep: Path | None) -> tuple[Path, dict[str, Any]]:
    """The one-shard index folder and its build row: built (and timed) in `tmp`, or in
    keep/one and reused from there by a later run that asks for the same size (the build
    row is then the one measured when it was built)."""
    one = (keep if keep is not None else tmp) / "one"
    done = one / BUILT
    if keep is not None and done.exists():
        row = json.loads(done.read_text())
        if row["requested_tokens"] == n_tokens:
            log.info("reusing the index in %s (built %s)", one, row["built_at"])
            return one, row
    shutil.rmtree(one, ignore_errors=True)
    one.mkdir(parents=True)
    t0 = time.perf_counter()
    record = synthetic_folder(one, n_tokens)
    data_s = time.perf_counter() - t0
    write_plan(one, record, 2**31 - 1, {})
    (built,) = build_shards_in_children(one)
    n = record["n_tokens"]
    row = {"n_tokens": n, "n_keys": record["n_keys"], "data_s": data_s,
           "build_s": built["wall_s"], "sort_s": built["sort_s"],
           "peak_rss_gb": built["peak_rss_bytes"] / 1e9,
           "peak_rss_bytes_per_token": built["peak_rss_bytes"] / n,
           "disk_bytes_per_token": disk_bytes(one) / n, "build_load_avg": load_average(),
           "requested_tokens": n_tokens, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                  time.gmtime()),
           "record": record}
    if keep is not None:
        atomic_write_text(done, json.dumps(row, indent=1))
    return one, row


def measure(n_tokens: int, workdir: str | Path | None = None, real_shards: int = 0,
            n_views: int = 10, keep: Path | None = None) -> list[dict[str, Any]]:
    """One shard of n_tokens (and, when real_shards, the same corpus in that many shards):
    build rows and beam-step rows. `keep`: build the one-shard index in keep/one (or reuse
    it from there) instead of a temporary folder."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        one, built = one_shard(Path(tmp), n_tokens, keep)
        record = built["record"]
        n = record["n_tokens"]
        base = {"n_tokens": n, "n_keys": record["n_keys"], "data_s": built["data_s"],
                "load_avg": load_average()}
        rows.append({**base, "index": "one shard", "shards": 1,
                     **{k: built[k] for k in ("build_s", "sort_s", "peak_rss_gb",
                                              "peak_rss_bytes_per_token",
                                              "disk_bytes_per_token")},
                     **beam_steps(open_index(one))})
        if n_views:
            rows.append({**base, "index": f"{n_views} views", "shards": n_views,
                         **beam_steps(views(one, n_views))})
        if real_shards:
            many = Path(tmp) / "many"
            shutil.copytree(one, many, ignore=shutil.ignore_patterns(
                "shards", "build.json", "meta.json"))
            write_plan(many, record, -(-n // real_shards) + 64, {})
            built = build_shards_in_children(many)
            peak = max(b["peak_rss_bytes"] for b in built)
            rows.append({**base, "index": f"{len(built)} shards", "shards": len(built),
                         "build_s": sum(b["wall_s"] for b in built),
                         "sort_s": sum(b["sort_s"] for b in built), "peak_rss_gb": peak / 1e9,
                         "peak_rss_bytes_per_token": peak / max(b["n_tokens"] for b in built),
                         "disk_bytes_per_token": disk_bytes(many) / n,
                         **beam_steps(open_index(many))})
    log.info("riches_shards %s", rows)
    return rows


DESCRIPTION = (
    "Synthetic keys: token ids (Zipf(1.2) - 1) mod 49,152, key lengths 1 + NegBinomial(6, "
    "6/18.4) (mean 13.4 tokens, Factoid-Wiki's proposition mean), seed 0 "
    "(benchmarks/riches_shards.py). build_s / peak_rss: one `python -m riches.index_build "
    "--shard i/n` child per shard under /usr/bin/time -v (memory-mapped text and suffix array "
    "pages included). A beam step: KeyConstraint.allowed + advance for 10 hypotheses, each "
    "copying a random key from its start (30 beams; narrow spans' memo cleared per beam, wide "
    "spans' kept, as in a decoding run); 'N views' = one shard opened N times as N shards.")

COLUMNS = ["index", "shards", "n_tokens", "n_keys", "build_s", "sort_s", "peak_rss_gb",
           "peak_rss_bytes_per_token", "disk_bytes_per_token", "ms_per_beam_step_mean",
           "ms_per_beam_step_p50", "ms_per_beam_step_p95", "ms_per_hyp_step_mean",
           "allowed_mean", "beam_steps_timed", "load_avg"]
# The Markdown shows COLUMNS as two readable tables (building, then looking up); the CSV
# keeps them in one.
TABLES = (("Building", ["index", "shards", "n_tokens", "n_keys", "build_s", "sort_s",
                        "peak_rss_gb", "peak_rss_bytes_per_token", "disk_bytes_per_token"]),
          ("Looking up (a beam step)", ["index", "shards", "ms_per_beam_step_mean",
                                        "ms_per_beam_step_p50", "ms_per_beam_step_p95",
                                        "ms_per_hyp_step_mean", "allowed_mean",
                                        "beam_steps_timed", "load_avg"]))


def targets(rows: list[dict]) -> list[tuple[str, bool, str]]:
    out = []
    for r in rows:
        # below ~1e8 tokens the interpreter and numpy (~100 MB) dominate a job's peak
        if "peak_rss_bytes_per_token" in r and r["n_tokens"] / r["shards"] >= 1e8:
            out.append(ratio_target(
                f"{r['index']}, {r['n_tokens'] / 1e6:.0f}M tokens: one shard job's peak RSS "
                f"<= {BYTES_PER_TOKEN_PEAK:g} bytes per shard token",
                r["peak_rss_bytes_per_token"], BYTES_PER_TOKEN_PEAK, " B",
                higher_is_better=False))
        out.append(ratio_target(
            f"{r['index']}: < {MS_PER_HYP_STEP:g} ms per hypothesis per beam step (mean)",
            r["ms_per_hyp_step_mean"], MS_PER_HYP_STEP, " ms", higher_is_better=False))
    return out


def write_results(rows: list[dict], out_dir: Path | None = None) -> Path:
    out_dir = out_dir or results_dir() / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(out_dir / "riches_shards.csv", [{c: r.get(c) for c in COLUMNS} for r in rows])
    return write_markdown(rows, out_dir)


def write_markdown(rows: list[dict], out_dir: Path) -> Path:
    """results/bench/riches_shards.md from the rows (as measured, or read back from the CSV:
    `python -m benchmarks.riches_shards --from-csv`)."""
    lines = ["# RICHES index in shards", "", DESCRIPTION, "", *markdown_tables(rows, TABLES), "",
             "| target | met | measured |", "|---|---|---|",
             *[f"| {t} | {'yes' if ok else '**no**'} | {d} |" for t, ok, d in targets(rows)], ""]
    atomic_write_text(out_dir / "riches_shards.md", "\n".join(lines))
    return out_dir / "riches_shards.md"


def run() -> BenchResult:
    """`make bench`: BENCH_SHARDS_TOKENS tokens (default 2M) as 1 shard, 10 views, 10 shards."""
    n = int(float(os.environ.get("BENCH_SHARDS_TOKENS", SMALL_TOKENS)))
    rows = measure(n, real_shards=10 if n <= 5e7 else 0)
    summary = [DESCRIPTION, "", *markdown_tables(rows, TABLES)]
    # riches_shards_small.csv: results/bench/riches_shards.{csv,md} hold the paper-size run
    return BenchResult("riches_shards_small", rows, summary, targets(rows))


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if argv[:1] == ["--from-csv"]:  # rewrite the Markdown of the committed measurement
        out_dir = results_dir() / "bench"
        log.info("wrote %s", write_markdown(read_rows(out_dir / "riches_shards.csv"), out_dir))
        return 0
    keep = None
    if "--keep" in argv:
        at = argv.index("--keep")
        if at + 1 >= len(argv):
            sys.stderr.write("--keep needs a folder: --keep DIR\n")
            return 2
        keep = Path(argv[at + 1])
        argv = argv[:at] + argv[at + 2:]
    n = int(float(argv[0])) if argv else int(float(os.environ.get("BENCH_SHARDS_TOKENS",
                                                                  SMALL_TOKENS)))
    rows = measure(n, real_shards=10 if n <= 5e7 else 0, keep=keep)
    log.info("wrote %s", write_results(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
