"""RICHES index lookup benchmark: python -m scripts.riches_bench [N_TOKENS ...].

Writes results/riches/bench.csv and bench.md (time per decoding step per beam, memory per
corpus token) for synthetic and wiki-vital-derived corpora; default sizes 1M, 10M, 50M."""
from __future__ import annotations

import csv
import io
import logging
import sys

from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from riches.bench import lookup_benchmark
from riches.tables import to_markdown

log = logging.getLogger("riches_bench")
COLUMNS = ["corpus", "n_tokens", "n_keys", "bytes_per_token", "index_mb", "build_s",
           "root_children_s", "ms_per_step_mean", "ms_per_step_p50", "ms_per_step_p95",
           "ms_per_step_max", "distinct_next_mean", "steps_timed"]


def _num(v: str):
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sizes = [int(float(a)) for a in argv] or [1_000_000, 10_000_000, 50_000_000]
    rows = []
    for n in sizes:
        for corpus in ("synthetic", "wiki-vital"):
            rows.append(lookup_benchmark(n, corpus))
    out = results_dir() / "riches"
    out.mkdir(parents=True, exist_ok=True)
    if (out / "bench.csv").exists():  # keep rows of other sizes from earlier invocations
        with open(out / "bench.csv", newline="", encoding="utf-8") as f:
            new = {(r["corpus"], int(r["n_tokens"]) // 1000) for r in rows}
            old = [{k: _num(v) for k, v in r.items()} for r in csv.DictReader(f)
                   if (r["corpus"], int(r["n_tokens"]) // 1000) not in new]
        rows = sorted(old + rows, key=lambda r: (r["corpus"], int(r["n_tokens"])))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(out / "bench.csv", buf.getvalue())
    body = [[f"{r[c]:.4g}" if isinstance(r[c], float) else str(r[c]) for c in COLUMNS] for r in rows]
    atomic_write_text(out / "bench.md", to_markdown(
        "RICHES index lookup benchmark", COLUMNS, body,
        "One step = allowed next tokens of a hypothesis's span + narrowing by the chosen token, "
        "on a memory-mapped index; memo cleared before every walk."))
    log.info("wrote %s", out / "bench.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
