"""Issue 29 item 1, the pure parts of sharding one cell (ragrepro/shards.py): the partition
into whole blocks, the run id of a part, a part's folders, and the merge of parts into one
committed run, against hand-computed values."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys

import pytest

from ragrepro import shards
from ragrepro.errors import ConfigError, DataError
from ragrepro.runlock import lock_path
from ragrepro.tracking import Run, run_id_of


# -- partition ----------------------------------------------------------------------------------
@pytest.mark.parametrize("n_items,block,parts,expected", [
    # 5 blocks [0,2) [2,4) [4,6) [6,8) [8,10): part p gets blocks p*5//3 .. (p+1)*5//3 - 1
    (10, 2, 3, [(0, 2), (2, 6), (6, 10)]),
    # a short last block stays whole: 3 blocks [0,4) [4,8) [8,9)
    (9, 4, 2, [(0, 4), (4, 9)]),
    # more parts than blocks: 2 blocks [0,2) [2,3); parts 0 and 2 are empty
    (3, 2, 4, [(0, 0), (0, 2), (2, 2), (2, 3)]),
    (0, 3, 2, [(0, 0), (0, 0)]),
    (7, 1, 1, [(0, 7)]),
])
def test_block_range_by_hand(n_items, block, parts, expected):
    got = [shards.block_range(n_items, block, p, parts) for p in range(parts)]
    assert [(r.start, r.stop) for r in got] == expected


def test_parts_cover_every_item_once_in_order_at_block_boundaries():
    for n_items in range(23):
        for block in range(1, 6):
            for parts in range(1, 7):
                got = [shards.block_range(n_items, block, p, parts) for p in range(parts)]
                assert [i for r in got for i in r] == list(range(n_items))
                assert all(r.start % block == 0 for r in got)  # never inside a batch
                sizes = [len(range(-(-r.start // block), -(-r.stop // block))) for r in got]
                assert max(sizes) - min(sizes) <= 1  # whole blocks shared evenly


@pytest.mark.parametrize("args", [(5, 0, 0, 2), (5, 2, 2, 2), (5, 2, -1, 2), (-1, 2, 0, 1)])
def test_bad_partition_is_refused(args):
    with pytest.raises(ConfigError):
        shards.block_range(*args)


def test_spans_and_selection_per_text():
    units = shards.spans([5, 3], 2)  # windows of two texts in blocks of 2
    assert units == [(0, 0, 2), (0, 2, 4), (0, 4, 5), (1, 0, 2), (1, 2, 3)]
    assert shards.selected(units, range(2, 4)) == {0: range(4, 5), 1: range(2)}
    assert shards.selected(units, range(2)) == {0: range(4)}
    assert shards.selected(units, range(3, 3)) == {}


@pytest.mark.parametrize("spec,expected", [("0/3", (0, 3)), (" 2 / 3", (2, 3))])
def test_parse_shard_is_the_encoders(spec, expected):
    from ragrepro.retrieval.sharding import parse_shard

    assert parse_shard is shards.parse_shard and parse_shard(spec) == expected


# -- identity -----------------------------------------------------------------------------------
CELL = {"name": "ralm/table1", "seed": 0, "limit": 2, "model": {"name": "m"},
        "pipeline": {"_target_": "ralm.lm_eval.run", "lm": {"name": "m"}}}


def test_a_cell_shard_keeps_the_unsharded_run_id():
    plain = run_id_of(CELL)
    for value in (None, "0/3", "2/3", "merge"):
        assert run_id_of({**CELL, "shard": value}) == plain
        assert shards.cell_shard({**CELL, "shard": value}) == value
    assert plain == run_id_of({**CELL, "shard": None, "notes": "x"})


def test_a_pipeline_taking_shard_keeps_hashing_it():
    encode = {"name": "core/encode_shards", "shard": "0/4",
              "pipeline": {"_target_": "ragrepro.retrieval.sharding.run", "shard": "0/4"}}
    other = {**encode, "shard": "1/4", "pipeline": {**encode["pipeline"], "shard": "1/4"}}
    assert run_id_of(encode) != run_id_of(other)
    assert shards.cell_shard(encode) is None
    # the id as computed before `shard` was a root key of every config: the key stays in it
    from ragrepro.hashing import hash_obj
    assert run_id_of(encode) == hash_obj({"name": "core/encode_shards", "shard": "0/4",
                                          "pipeline": {"_target_": encode["pipeline"]["_target_"]}})


# -- a part's folders ---------------------------------------------------------------------------
def test_part_folders_and_lock(tmp_path):
    part = shards.PartRun("ralm/table1", "abc", tmp_path, part=1, parts=3)
    assert part.folder == tmp_path / "ralm/table1/tmp_abc/shards/1of3"
    assert part.work_dir == part.final_dir == part.folder
    assert part.samples_path == part.folder / "samples.jsonl"
    assert part.csv_path == tmp_path / "ralm/table1.csv"  # read (RICHES k: auto), never written
    assert lock_path(part.lock_run()) == tmp_path / "ralm/table1/abc.shard-1of3.writer"
    assert shards.part_of(part) == (1, 3) and shards.part_of(Run("e", "abc", tmp_path)) is None
    assert shards.items_of(part, 10, 2) == range(2, 6)
    assert shards.items_of(Run("e", "abc", tmp_path), 10, 2) == range(10)
    assert not part.is_finished()
    with pytest.raises(AssertionError):
        part.commit()


def test_rerun_command_replaces_the_shard():
    cmd = ["experiment=ralm/table1", "shard=0/3", "limit=2"]
    assert shards.rerun_command(cmd, 1, 3) == "ragrepro experiment=ralm/table1 limit=2 shard=1/3"


# -- merge --------------------------------------------------------------------------------------
def _sum_merger(parts, samples, out):
    """A toy method: the metric is the sum of the samples' x, in order."""
    return {"total": sum(s["x"] for s in samples), "order": "".join(s["id"] for s in samples),
            "n": len(samples)}


def _write(tmp_path, index, parts, samples, settings=None, extra_files=()):
    part = shards.PartRun("toy/exp", "rid", tmp_path, part=index, parts=parts)
    part.start(code={"git_commit": "c0", "git_dirty": False, "code_id": "k1"})
    for s in samples:
        part.add_sample(s)
    for name, text in extra_files:
        (part.folder / name).write_text(text)
    part.timings = {"evaluate": 1.5 + index}
    shards.write_part(part, target="tests.toy.run", config={"name": "toy/exp", "shard": f"{index}/{parts}"},
                      metrics={"total": -1}, settings=settings or {"zeta": 1, "alpha": 2},
                      metadata={"started_at": 100.0 + index, "git_commit": "c0"},
                      command=["experiment=toy/exp", f"shard={index}/{parts}"])
    return part


def test_merge_commits_one_run_equal_to_the_unsharded_order(tmp_path):
    run = Run("toy/exp", "rid", tmp_path)
    _write(tmp_path, 0, 3, [{"id": "a", "x": 1}, {"id": "b", "x": 2}],
           extra_files=[("autoais.jsonl", '{"qid": "a"}\n{"qid": "b"}\n'), ("judge.json", "{}")])
    _write(tmp_path, 2, 3, [{"id": "e", "x": 5}], extra_files=[("autoais.jsonl", '{"qid": "e"}\n')])
    assert shards.merge_if_complete(run, 3, _sum_merger, {}) is None  # part 1 missing
    with pytest.raises(ConfigError, match=r"part\(s\) 1 of 3.*ragrepro experiment=toy/exp "
                                          r"shard=1/3"):
        shards.merge_if_complete(run, 3, _sum_merger, {}, required=True)
    _write(tmp_path, 1, 3, [{"id": "c", "x": 3}, {"id": "d", "x": 4}],
           extra_files=[("autoais.jsonl", '{"qid": "c"}\n{"qid": "d"}\n')])
    metrics = shards.merge_if_complete(run, 3, _sum_merger, {})
    assert metrics == {"total": 15, "order": "abcde", "n": 5}
    final = run.final_dir
    assert run.is_finished() and not (final / "shards").exists()
    assert not run.work_dir.exists()
    samples = [json.loads(x) for x in (final / "samples.jsonl").read_text().splitlines()]
    assert [s["id"] for s in samples] == list("abcde")
    ais = [json.loads(x)["qid"] for x in (final / "autoais.jsonl").read_text().splitlines()]
    assert ais == list("abcde")  # every JSONL file joined in part order
    assert (final / "judge.json").read_text() == "{}"  # another file: part 0's
    data = json.loads((final / "metrics.json").read_text())
    assert data["metrics"] == metrics and data["settings"] == {"zeta": 1, "alpha": 2}
    assert data["timings_s"] == {"evaluate": 1.5 + 2.5 + 3.5}  # compute of all parts
    assert data["metadata"]["started_at"] == 100.0
    assert data["metadata"]["shards"]["parts"] == 3
    assert data["metadata"]["shards"]["samples"] == [2, 2, 1]
    assert json.loads((final / "config.json").read_text())["shard"] is None
    assert json.loads((final / "code.json").read_text())["versions"][0]["code_id"] == "k1"
    with open(run.csv_path, newline="") as f:
        [row] = list(csv.DictReader(f))
    assert row["run_id"] == "rid" and row["total"] == "15"
    header = list(row)
    assert header.index("zeta") < header.index("alpha")  # the pipeline's order, not sorted
    assert float(row["wall_s"]) == 7.5
    # nothing left to merge: a second call does nothing
    assert shards.merge_if_complete(run, 3, _sum_merger, {}) is None


def test_parts_with_other_settings_are_refused_by_key(tmp_path):
    run = Run("toy/exp", "rid", tmp_path)
    _write(tmp_path, 0, 2, [{"id": "a", "x": 1}], settings={"device": "cpu", "k": 1})
    _write(tmp_path, 1, 2, [{"id": "b", "x": 2}], settings={"device": "cuda", "k": 1})
    with pytest.raises(DataError, match=r"device: 'cpu' vs 'cuda'.*delete .*1of2"):
        shards.merge_if_complete(run, 2, _sum_merger, {})
    assert not run.is_finished()


def test_parts_of_run_needs_one_n(tmp_path):
    run = Run("toy/exp", "rid", tmp_path)
    with pytest.raises(ConfigError, match="no shard parts"):
        shards.parts_of_run(run)
    _write(tmp_path, 0, 2, [{"id": "a", "x": 1}])
    assert shards.parts_of_run(run) == 2
    _write(tmp_path, 0, 3, [{"id": "a", "x": 1}])
    with pytest.raises(ConfigError, match=r"parts of \[2, 3\] shards"):
        shards.parts_of_run(run)


def test_a_merge_held_by_a_live_process_is_left_to_it(tmp_path):
    run = Run("toy/exp", "rid", tmp_path)
    for i in range(2):
        _write(tmp_path, i, 2, [{"id": "ab"[i], "x": i}])
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from ragrepro import runlock; "
        "from ragrepro.tracking import Run; "
        f"run = Run('toy/exp', 'rid', Path({str(tmp_path)!r})); "
        "cm = runlock.writing(run, runlock.WriterSettings()); cm.__enter__(); "
        "print('held', flush=True); time.sleep(120)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert shards.merge_if_complete(run, 2, _sum_merger, {}) is None  # it merges, not us
        assert not run.is_finished() and shards.finished_parts(run, 2) == [0, 1]
    finally:
        holder.kill()
        holder.wait()
    # the holder died without merging: its lock is taken over on this host, the merge runs
    assert shards.merge_if_complete(run, 2, _sum_merger, {}) == {"total": 1, "order": "ab",
                                                                  "n": 2}


def test_pure_helpers():
    recs = [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}, {"k": 1, "v": "c"}]
    assert shards.first_by_key(recs, lambda r: r["k"]) == recs[:2]


# -- the methods' merges ------------------------------------------------------------------------
def _part(tmp_path, index, samples, metrics, settings=None):
    return shards.Part(index, tmp_path / f"{index}", {"metrics": metrics,
                                                      "settings": settings or {}}, samples)


def _win(text, window, nll, n, rank=None):
    return {"text": text, "window": window, "nll_sum": nll, "n_scored": n, "doc_rank": rank,
            "diag": {"no_document": rank is None, "doc_truncated": None}}


def test_ralm_merge_sums_nll_in_the_unsharded_order(tmp_path):
    from ralm.lm_eval import merge_shards

    totals = {"n_tokens": 7, "n_words": 4, "n_texts": 1}
    a = [_win(0, 0, 1.5, 3), _win(0, 1, 2.25, 2, rank=0)]
    b = [_win(0, 2, 0.75, 1, rank=1)]
    parts = [_part(tmp_path, 0, a, {**totals, "shard_windows_expected": 2}),
             _part(tmp_path, 1, b, {**totals, "shard_windows_expected": 1})]
    m = merge_shards(parts, a + b, tmp_path)
    assert m["nll_sum"] == 4.5 and m["n_scored_tokens"] == 6 and m["n_windows"] == 3
    assert m["ppl_word"] == pytest.approx(math.exp(4.5 / 4), rel=1e-12)
    assert m["ppl_token"] == pytest.approx(math.exp(4.5 / 7), rel=1e-12)
    assert m["n_windows_with_doc"] == 2 and m["n_tokens"] == 7 and m["n_words"] == 4
    with pytest.raises(DataError, match="out of order or twice"):
        merge_shards(parts, a + a, tmp_path)
    short = [parts[0], _part(tmp_path, 1, b, {**totals, "shard_windows_expected": 2})]
    with pytest.raises(DataError, match="scored 3 windows of 4"):
        merge_shards(short, a + b, tmp_path)
    other = [parts[0], _part(tmp_path, 1, b, {**totals, "n_words": 5,
                                              "shard_windows_expected": 1})]
    with pytest.raises(DataError, match="counts other texts"):
        merge_shards(other, a + b, tmp_path)


def test_ralm_official_files_join_per_text(tmp_path):
    from ralm.lm_eval import merge_official_files

    merge_official_files([[{"w": 0}], [{"w": 1}, {"w": 2}], []], tmp_path / "j.json")
    assert json.loads((tmp_path / "j.json").read_text()) == [{"w": 0}, {"w": 1}, {"w": 2}]
    merge_official_files([[[{"w": 0}], []], [[], [{"w": 5}]]], tmp_path / "p.json")
    assert json.loads((tmp_path / "p.json").read_text()) == [[{"w": 0}], [{"w": 5}]]


def test_riches_merge_recomputes_autoais_from_the_joined_lines(tmp_path):
    from riches.pipeline import merge_shards

    lines = [{"qid": "a", "attributed": True, "nli_score": 0.9},
             {"qid": "b", "attributed": False, "nli_score": None},
             {"qid": "c", "attributed": True, "nli_score": 0.6},
             {"qid": "d", "attributed": True, "nli_score": 0.3}]
    (tmp_path / "autoais.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    samples = [{"qid": q, "f1_squad": f, "em_squad": e, "n_keys": 1} for q, f, e in
               [("a", 1.0, 1.0), ("b", 0.5, 0.0), ("c", 0.0, 0.0), ("d", 0.25, 0.0)]]
    parts = [_part(tmp_path, 0, samples[:2], {"autoais_substitute": 0.5,
                                              "autoais_substitute_mean_score": 0.45},
                   {"riches_method": "dense_reader"}),
             _part(tmp_path, 1, samples[2:], {}, {"riches_method": "dense_reader"})]
    m = merge_shards(parts, samples, tmp_path)
    assert m["autoais_substitute"] == 0.75
    assert m["autoais_substitute_mean_score"] == pytest.approx((0.9 + 0 + 0.6 + 0.3) / 4)
    assert m["f1_squad"] == pytest.approx(1.75 / 4) and m["em_squad"] == 0.25
    assert m["n"] == 4 and "verbatim_rate" not in m  # a reader decodes no keys
