"""Build a RICHES index in bounded memory: keys tokenised in a streaming pass into a raw token
file, the text cut at separators into shards of int32 suffix arrays, one job per shard.

Folder layout (cache_dir()/riches/index/<fingerprint>/, or any folder):

- `tokens.u16` (`.u32` past 65,535 ids): the text `SEP k1 SEP ... SEP`, raw little-endian;
  `key_starts.i64`, `key_doc.i64`: each key's first token offset and its document. All three
  are written batch by batch (never a list of every token) and memory-mapped afterwards;
  `tokens.json` marks them complete.
- `build.json`: the plan, written once: separator, token width, and the shards
  `[first, last, first_key, end_key]` (token offsets of the opening and closing separator,
  inclusive; consecutive shards share the boundary separator).
- `shards/<i>/sa.i32`: shard i's suffix array (riches/index_sort.py) with `done.json`. A
  finished shard is skipped, so a killed build resumes; any launcher can build shard i
  (`build_shard`, or `python -m riches.index_build DIR --shard i/n`).
- `meta.json`: written last, when every shard is done: the finished marker.

Peak memory of one shard job: its slice of the token file and its suffix array (both
memory-mapped, 2 + 4 bytes a token of a uint16 text) plus the sorter's bounded scratch;
measured in benchmarks/riches_shards.py (docs/performance.md).
"""
from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import resource
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np

from ragrepro.errors import ConfigError, DataError
from ragrepro.io import atomic_write_text, locked
from ragrepro.paths import cache_dir

from .index import FORMAT_VERSION, SuffixIndex, keys_fingerprint, token_dtype
from .index_sharded import ShardedIndex
from .index_sort import sort_suffixes

log = logging.getLogger(__name__)

MAX_SHARD_TOKENS = 2**31 - 1   # every position of a shard fits int32
KEY_BATCH = 4096               # texts per tokenizer call
TOKENS_MARK, PLAN, META = "tokens.json", "build.json", "meta.json"

Tokenize = Callable[[list[str]], Sequence[Sequence[int]]]


def token_file(folder: Path, dtype: np.dtype) -> Path:
    return Path(folder) / ("tokens.u16" if np.dtype(dtype) == np.uint16 else "tokens.u32")


# -- 1. streaming tokenisation ---------------------------------------------------------------
def _batches(items: Iterable, size: int) -> Iterable[list]:
    it = iter(items)
    while batch := list(itertools.islice(it, size)):
        yield batch


class TokenWriter:
    """Appends keys (as token ids) to the raw token and key files of an index folder; the
    files are complete (renamed into place, tokens.json written) on `close()`."""

    def __init__(self, folder: Path, vocab_size: int) -> None:
        self.folder = Path(folder)
        self.sep, self.dtype = int(vocab_size), token_dtype(vocab_size)
        self.paths = {"tokens": token_file(self.folder, self.dtype),
                      "key_starts": self.folder / "key_starts.i64",
                      "key_doc": self.folder / "key_doc.i64"}
        self.tmp = {k: p.with_name(p.name + ".tmp") for k, p in self.paths.items()}
        for path in self.tmp.values():
            path.write_bytes(b"")
        self._append("tokens", np.array([self.sep], dtype=self.dtype))
        self.n_tokens, self.n_keys = 1, 0

    def _append(self, name: str, values: np.ndarray) -> None:
        with open(self.tmp[name], "ab") as f:  # reopened per batch: no handle left open
            values.tofile(f)

    def add(self, lengths: np.ndarray, flat: np.ndarray, docs: np.ndarray) -> None:
        """Keys of `lengths` tokens, concatenated in `flat`, pointing to `docs`."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if len(flat) and (int(flat.min()) < 0 or int(flat.max()) >= self.sep):
            raise DataError(f"token id outside [0, {self.sep}) in keys {self.n_keys}.."
                            f"{self.n_keys + len(lengths)}: ids must be below the separator "
                            f"(the vocabulary size).")
        if not len(lengths):
            return
        rel = np.concatenate([[0], np.cumsum(lengths[:-1] + 1)])  # key starts in this chunk
        chunk = np.full(int(lengths.sum()) + len(lengths), self.sep, dtype=self.dtype)
        chunk[np.repeat(rel, lengths) + _offsets_in_runs(lengths)] = flat
        self._append("tokens", chunk)
        self._append("key_starts", (self.n_tokens + rel).astype(np.int64))
        self._append("key_doc", np.asarray(docs, dtype=np.int64))
        self.n_tokens += len(chunk)
        self.n_keys += len(lengths)

    def close(self) -> dict:
        for k, path in self.paths.items():
            os.replace(self.tmp[k], path)
        record = {"sep": self.sep, "dtype": self.dtype.name, "n_tokens": self.n_tokens,
                  "n_keys": self.n_keys, "format": FORMAT_VERSION}
        atomic_write_text(self.folder / TOKENS_MARK, json.dumps(record, indent=1))
        log.info("Tokenised %d keys into %d tokens (%s)", self.n_keys, self.n_tokens,
                 self.paths["tokens"])
        return record


def write_tokens(folder: Path, key_texts: Iterable[str], key_doc: Iterable[int],
                 tokenize: Tokenize, vocab_size: int, batch: int = KEY_BATCH) -> dict:
    """Tokenise the keys batch by batch straight into the token and key files; returns (and
    writes) the tokens.json record. Memory: one batch of token lists."""
    writer = TokenWriter(folder, vocab_size)
    for pairs in _batches(zip(key_texts, key_doc), batch):
        texts = [t for t, _ in pairs]
        ids = tokenize(texts)
        if len(ids) != len(texts):
            raise DataError(f"the tokenizer returned {len(ids)} token lists for "
                            f"{len(texts)} keys; it must return one per key.")
        lengths = np.fromiter((len(k) for k in ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64,
                           count=int(lengths.sum()))
        writer.add(lengths, flat, np.asarray([d for _, d in pairs], dtype=np.int64))
    return writer.close()


def _offsets_in_runs(lengths: np.ndarray) -> np.ndarray:
    """0, 1, .., l0-1, 0, 1, .., l1-1, ... (int64)."""
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    heads = np.cumsum(lengths) - lengths
    return np.arange(total, dtype=np.int64) - np.repeat(heads, lengths)


def open_arrays(folder: Path, record: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The token, key-start and key-document files, memory-mapped read-only."""
    folder = Path(folder)
    dtype = np.dtype(record["dtype"])
    text = np.memmap(token_file(folder, dtype), dtype=dtype, mode="r", shape=(record["n_tokens"],))
    if record["n_keys"] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return text, empty, empty
    starts = np.memmap(folder / "key_starts.i64", dtype=np.int64, mode="r")
    docs = np.memmap(folder / "key_doc.i64", dtype=np.int64, mode="r")
    if len(starts) != record["n_keys"] or len(docs) != record["n_keys"]:
        raise DataError(f"{folder}: {len(starts)} key starts and {len(docs)} documents for "
                        f"{record['n_keys']} keys: the files are damaged; delete the folder.")
    return text, starts, docs


# -- 2. the shard plan -----------------------------------------------------------------------
def plan_shards(key_starts: np.ndarray, n_tokens: int, shard_tokens: int) -> list[list[int]]:
    """[first, last, first_key, end_key] per shard: the separators at token offsets first and
    last (inclusive) enclose keys first_key .. end_key - 1, and last - first + 1 <=
    shard_tokens. Each shard ends at the last separator that fits."""
    if not 3 <= shard_tokens <= MAX_SHARD_TOKENS:
        raise ConfigError(f"riches.index_shard_tokens={shard_tokens}; it must lie in "
                          f"[3, {MAX_SHARD_TOKENS}] (int32 suffix arrays).")
    n_keys = len(key_starts)
    shards: list[list[int]] = []
    first, k = 0, 0
    while True:
        if n_tokens - first <= shard_tokens:
            shards.append([first, n_tokens - 1, k, n_keys])
            return shards
        # the last key whose opening separator (its start - 1) lies within the shard
        end = int(np.searchsorted(key_starts, first + shard_tokens, side="right")) - 1
        if end <= k:
            length = (int(key_starts[k + 1]) if k + 1 < n_keys else n_tokens) - int(key_starts[k]) - 1
            raise ConfigError(f"key {k} has {length} tokens: a shard of "
                              f"riches.index_shard_tokens={shard_tokens} cannot hold it with its "
                              f"two separators; raise riches.index_shard_tokens.")
        last = int(key_starts[end]) - 1
        shards.append([first, last, k, end])
        first, k = last, end


def write_plan(folder: Path, record: dict, shard_tokens: int, meta: dict) -> dict:
    """build.json: written once; a resumed build keeps its first plan."""
    path = Path(folder) / PLAN
    if path.exists():
        plan = json.loads(path.read_text())
        if plan["shard_tokens"] != shard_tokens:
            log.warning("%s was planned with shards of %d tokens; resuming it with those "
                        "(not %d): delete the folder to re-plan.", folder, plan["shard_tokens"],
                        shard_tokens)
        return plan
    _, starts, _ = open_arrays(folder, record)
    plan = {**record, "shard_tokens": int(shard_tokens),
            "shards": plan_shards(starts, record["n_tokens"], shard_tokens), "meta": meta}
    atomic_write_text(path, json.dumps(plan, indent=1))
    return plan


def shard_dir(out_dir: Path, shard_no: int) -> Path:
    return Path(out_dir) / "shards" / f"{shard_no:05d}"


# -- 3. one shard, one job ---------------------------------------------------------------------
def build_shard(token_file: Path, shard_no: int, out_dir: Path) -> dict:
    """Sort shard `shard_no` of the plan in out_dir/build.json into
    out_dir/shards/<i>/sa.i32 (skipped when already done); returns its done.json record
    (tokens, seconds, the process's peak RSS so far). Two jobs given the same shard (a
    relaunch, or parts of two different counts) take turns on a lock: the second finds it
    done."""
    out_dir = Path(out_dir)
    plan = json.loads((out_dir / PLAN).read_text())
    if not 0 <= shard_no < len(plan["shards"]):
        raise ConfigError(f"shard {shard_no} of a plan with {len(plan['shards'])} shards; "
                          f"choose 0..{len(plan['shards']) - 1}.")
    folder = shard_dir(out_dir, shard_no)
    done = folder / "done.json"
    folder.mkdir(parents=True, exist_ok=True)
    with locked(folder / "sa.i32"):
        if done.exists():
            log.info("Shard %d already built (%s)", shard_no, folder)
            return json.loads(done.read_text())
        first, last = plan["shards"][shard_no][:2]
        dtype = np.dtype(plan["dtype"])
        n = last - first + 1
        text = np.memmap(token_file, dtype=dtype, mode="r", offset=first * dtype.itemsize,
                         shape=(n,))
        tmp = folder / "sa.i32.tmp"
        t0 = time.perf_counter()
        sa = np.memmap(tmp, dtype=np.int32, mode="w+", shape=(n,))
        sort_suffixes(text, plan["sep"], out=sa)
        sa.flush()
        del sa
        os.replace(tmp, folder / "sa.i32")
        record = {"shard": shard_no, "n_tokens": n, "seconds": time.perf_counter() - t0,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
        atomic_write_text(done, json.dumps(record, indent=1))
    log.info("Shard %d: %d tokens sorted in %.1f s", shard_no, n, record["seconds"])
    return record


def missing_shards(out_dir: Path) -> list[int]:
    plan = json.loads((Path(out_dir) / PLAN).read_text())
    return [i for i in range(len(plan["shards"]))
            if not (shard_dir(out_dir, i) / "done.json").exists()]


def finish(out_dir: Path) -> dict:
    """meta.json, once every shard is done (the index's finished marker)."""
    out_dir = Path(out_dir)
    left = missing_shards(out_dir)
    if left:
        raise DataError(f"{out_dir}: shards {left} are not built yet; build them with "
                        f"`python -m riches.index_build {out_dir} --shard i/n` first.")
    plan = json.loads((out_dir / PLAN).read_text())
    bpt = np.dtype(plan["dtype"]).itemsize + 4
    meta = {**plan["meta"], **{k: plan[k] for k in ("sep", "dtype", "n_tokens", "n_keys",
                                                     "format", "shard_tokens", "shards")},
            "bytes_per_token": bpt}
    atomic_write_text(out_dir / META, json.dumps(meta, indent=1))  # two last jobs: both fine
    return meta


def prepare_folder(out_dir: Path, key_texts: Iterable[str], key_doc: Iterable[int],
                   tokenize: Tokenize, vocab_size: int, shard_tokens: int = MAX_SHARD_TOKENS,
                   meta: dict | None = None, batch: int = KEY_BATCH) -> dict:
    """Tokenise (unless done) and plan (unless planned); returns the plan. Jobs started
    together take turns on a lock: one tokenises, the others then read its files."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with locked(out_dir / "prepare"):
        mark = out_dir / TOKENS_MARK
        record = json.loads(mark.read_text()) if mark.exists() else \
            write_tokens(out_dir, key_texts, key_doc, tokenize, vocab_size, batch)
        return write_plan(out_dir, record, shard_tokens, meta or {})


def build_folder(out_dir: Path, key_texts: Iterable[str], key_doc: Iterable[int],
                 tokenize: Tokenize, vocab_size: int, shard_tokens: int = MAX_SHARD_TOKENS,
                 meta: dict | None = None, batch: int = KEY_BATCH) -> dict:
    """Tokenise (unless done), plan, build every missing shard in this process, finish."""
    out_dir = Path(out_dir)
    plan = prepare_folder(out_dir, key_texts, key_doc, tokenize, vocab_size, shard_tokens,
                          meta, batch)
    tokens = token_file(out_dir, np.dtype(plan["dtype"]))
    for i in missing_shards(out_dir):
        build_shard(tokens, i, out_dir)
    return finish(out_dir)


# -- 4. queried as one index -------------------------------------------------------------------
def open_index(folder: Path) -> SuffixIndex | ShardedIndex:
    """The finished index in `folder`: a SuffixIndex for one shard, else a ShardedIndex."""
    folder = Path(folder)
    if not (folder / META).exists():
        raise DataError(f"{folder} is not a finished RICHES index (no {META}); build it "
                        f"(riches.index_build) or delete the folder to rebuild.")
    meta = json.loads((folder / META).read_text())
    lost = [i for i in range(len(meta["shards"])) if not (shard_dir(folder, i) / "sa.i32").exists()]
    if lost:
        raise DataError(f"{folder}: shards {lost} of {len(meta['shards'])} are missing; rebuild "
                        f"them (experiment=riches/index_shards with the run's settings, or "
                        f"`python -m riches.index_build {folder} --shard all`).")
    text, starts, docs = open_arrays(folder, meta)
    shards = []
    for i, (first, last, k0, k1) in enumerate(meta["shards"]):
        sa = np.memmap(shard_dir(folder, i) / "sa.i32", dtype=np.int32, mode="r")
        shards.append(SuffixIndex(text[first:last + 1], sa, starts[k0:k1], docs[k0:k1],
                                  meta["sep"], meta, text_base=first))
    if len(shards) == 1:
        return shards[0]
    return ShardedIndex(shards, meta["n_tokens"], meta)


def index_folder(key_texts: Sequence[str], key_doc: Sequence[int], vocab_size: int,
                 fingerprint_extra: dict, cache_root: Path | None = None) -> tuple[Path, str]:
    """(folder, fingerprint) of the cached index of these keys under this tokenizer."""
    if len(key_texts) != len(key_doc):
        raise ConfigError(f"{len(key_texts)} keys but {len(key_doc)} document ids.")
    fp = keys_fingerprint(key_texts, key_doc, {**fingerprint_extra, "vocab": vocab_size,
                                                "format": FORMAT_VERSION})
    return Path(cache_root or cache_dir() / "riches" / "index") / fp, fp


def build_or_load(key_texts: Sequence[str], key_doc: Sequence[int], tokenize: Tokenize,
                  vocab_size: int, fingerprint_extra: dict, cache_root: Path | None = None,
                  shard_tokens: int = MAX_SHARD_TOKENS) -> SuffixIndex | ShardedIndex:
    """Load the cached index for these keys and this tokenizer, or build and cache it (in
    shards of at most `shard_tokens` tokens when the text is longer; an interrupted build
    resumes, and shards built by jobs of experiment=riches/index_shards are used).
    `tokenize(list[str]) -> list[list[int]]` must be the decoding-time key tokenisation; it
    is called on batches of KEY_BATCH keys."""
    folder, fp = index_folder(key_texts, key_doc, vocab_size, fingerprint_extra, cache_root)
    if (folder / META).exists():
        log.info("Loading RICHES index %s", folder)
        return open_index(folder)
    log.info("Building RICHES index over %d keys (once; cached in %s)", len(key_texts), folder)
    meta = build_folder(folder, key_texts, key_doc, tokenize, vocab_size, shard_tokens,
                        {**fingerprint_extra, "fingerprint": fp})
    log.info("Index: %d tokens, %d keys, %d shard(s), %d bytes/token", meta["n_tokens"],
             meta["n_keys"], len(meta["shards"]), meta["bytes_per_token"])
    return open_index(folder)


# -- command line: one shard per job of a Slurm/Ray array ---------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m riches.index_build",
        description="Build shards of a planned RICHES index folder (tokens + build.json).")
    parser.add_argument("folder", type=Path, help="the index folder (holds build.json)")
    parser.add_argument("--shard", default="all",
                        help="i/n: shard i of n (e.g. $SLURM_ARRAY_TASK_ID/10); 'all' (default): "
                             "every missing shard, then meta.json")
    parser.add_argument("--status", action="store_true", help="list the missing shards")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not (args.folder / PLAN).exists():
        raise SystemExit(f"{args.folder} has no {PLAN}: tokenise and plan it first "
                         f"(riches.index_build.build_folder, or a RICHES run).")
    plan = json.loads((args.folder / PLAN).read_text())
    if args.status:
        left = missing_shards(args.folder)
        log.info("%d of %d shards built; missing: %s", len(plan["shards"]) - len(left),
                 len(plan["shards"]), left)
        return 0
    tokens = token_file(args.folder, np.dtype(plan["dtype"]))
    if args.shard == "all":
        for i in missing_shards(args.folder):
            build_shard(tokens, i, args.folder)
        finish(args.folder)
        return 0
    try:
        i, n = (int(x) for x in args.shard.split("/"))
    except ValueError:
        raise SystemExit(f"--shard {args.shard!r}: use i/n (e.g. 3/10) or all.") from None
    if n != len(plan["shards"]):
        raise SystemExit(f"--shard {args.shard}: the plan has {len(plan['shards'])} shards, "
                         f"not {n}; use --shard i/{len(plan['shards'])}.")
    build_shard(tokens, i, args.folder)
    if not missing_shards(args.folder):
        finish(args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
