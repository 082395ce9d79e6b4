"""Issue 29 item 1, any evaluation cell split into shards (`shard=i/n`) and merged into one
run (ragrepro/shards.py): a RALM perplexity cell and a RALM QA cell, sharded through the local
launcher, a real one-node Slurm and a real Ray head, merged into the run of the unsharded cell:
the same run id, NLL sums to 1e-9 relative, the same perplexities, intervals, samples (in the
unsharded order), retrieval files and CSV row; QA predictions identical. A lost part reruns
alone; a killed merge is redone by `ragrepro shards merge`."""
from __future__ import annotations

import csv
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from launcher_helpers import base_env, computed_once, ragrepro

# 9 windows of 16 scored tokens in blocks of 2: 5 blocks, parts of 1, 2 and 2 blocks; BM25
# with zero-shot reranking of 2 documents (retrievals.jsonl, retrieval.json to merge)
PPL = ["experiment=ralm/table1", "model=smollm2-135m", "limit=2", "ralm.max_length=64",
       "ralm.stride=16", "ralm.doc_max_tokens=24", "ralm.k=2", "ralm/rerank=zeroshot",
       "ralm.batch_windows=2"]
# 6 questions answered 2 at a time (left padding): 3 batches, one per part
QA = ["experiment=ralm/table4", "model=smollm2-135m", "limit=6", "qa.num_docs=1",
      "qa.batch_size=2"]
THREE = "shard=0/3,1/3,2/3"
TWO = "shard=0/2,1/2"  # through Slurm and Ray: one job fewer; the local sweep covers 3 parts
TIMED = {"seconds", "seconds_per_question"}  # wall-clock per sample: never equal


def _run_dir(results: Path, experiment: str) -> Path:
    [folder] = [p for p in (results / experiment).iterdir()
                if p.is_dir() and not p.name.startswith("tmp_")]
    return folder


def _read(results: Path, experiment: str) -> dict:
    folder = _run_dir(results, experiment)
    samples = [json.loads(x) for x in (folder / "samples.jsonl").read_text().splitlines()]
    with open(results / f"{experiment}.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {"folder": folder, "metrics": json.loads((folder / "metrics.json").read_text()),
            "samples": [{k: v for k, v in s.items() if k not in TIMED} for s in samples],
            "rows": rows, "files": sorted(p.name for p in folder.iterdir())}


def _ok(proc) -> str:
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    return log


def _table_rows(results: Path) -> list[str]:
    """The rows of `ragrepro table ralm/table1`: perplexities with their bootstrap CIs."""
    out = _ok(ragrepro(["table", "ralm/table1", "--results", str(results)], base_env(results)))
    return [line for line in out.splitlines() if line.startswith("| smollm2")]


@pytest.fixture(scope="module")
def unsharded_ppl(tmp_path_factory, worker_id):
    """The unsharded cell, run once for the local, Slurm and Ray tests whichever worker they
    land on, with its `ragrepro table` rows."""
    def compute(folder: Path) -> dict:
        results = folder / "results"
        _ok(ragrepro(PPL, base_env(results), timeout=600))
        ref = _read(results, "ralm/table1")
        return {**ref, "folder": str(ref["folder"]), "table_rows": _table_rows(results)}

    _, ref = computed_once(tmp_path_factory, worker_id, "ppl-unsharded", compute)
    return {**ref, "folder": Path(ref["folder"])}


def assert_same_ppl(sharded: Path, ref: dict) -> None:
    got = _read(sharded, "ralm/table1")
    assert got["folder"].name == ref["folder"].name  # one run id, sharded or not
    a, b = ref["metrics"]["metrics"], got["metrics"]["metrics"]
    assert b["nll_sum"] == pytest.approx(a["nll_sum"], rel=1e-9, abs=0)
    assert (b["ppl_word"], b["ppl_token"]) == (a["ppl_word"], a["ppl_token"])
    assert b == a and b["n_windows"] == 9  # every metric, not only the perplexities
    assert got["metrics"]["settings"] == ref["metrics"]["settings"]
    assert got["samples"] == ref["samples"]  # every window record, in the unsharded order
    assert [s["window"] for s in got["samples"]] == list(range(9))
    assert got["files"] == ref["files"]
    for name in ("samples.jsonl", "retrievals.jsonl", "retrieval.json", "config.json"):
        assert (got["folder"] / name).read_bytes() == (ref["folder"] / name).read_bytes(), name
    assert "shards" not in got["files"] and not list((sharded / "ralm/table1").glob("tmp_*"))
    [row_a], [row_b] = ref["rows"], got["rows"]
    # what the code and the clock were (another code version when the checkout changed
    # between the parts: code_versions_mixed) is not what the run computed
    timed = {"finished_at", "wall_s", "code_id", "code_version", "git_dirty",
             "code_versions_mixed"}
    assert [k for k in row_b if k not in timed] == [k for k in row_a if k not in timed]
    assert {k: v for k, v in row_b.items() if k not in timed} == \
        {k: v for k, v in row_a.items() if k not in timed}
    assert _table_rows(sharded) == ref["table_rows"]  # same CIs in `ragrepro table`


@pytest.mark.slow
def test_local_sweep_merges_on_the_last_part_and_a_lost_part_reruns_alone(unsharded_ppl,
                                                                          tmp_path):
    results = tmp_path / "results"
    env = base_env(results)
    # the merge (in the last part) is killed after the CSV row: every part is written
    killed = ragrepro(["-m", *PPL, THREE], {**env, "RAGREPRO_FAULT": "kill_in_commit=1"},
                      timeout=600)
    assert killed.returncode != 0
    [work] = (results / "ralm/table1").glob("tmp_*")
    parts = work / "shards"
    assert sorted(p.name for p in parts.iterdir()) == ["0of3", "1of3", "2of3"]
    assert all((p / "part.json").is_file() for p in parts.iterdir())
    counts = [len((parts / f"{i}of3" / "samples.jsonl").read_text().splitlines())
              for i in range(3)]
    assert counts == [2, 4, 3]  # windows [0, 2), [2, 6), [6, 9): whole blocks of 2
    shutil.rmtree(parts / "1of3")  # a lost part
    before = time.time()
    status = _ok(ragrepro(["shards", "status", "ralm/table1", "--results-dir", str(results)],
                          env))
    assert "2 of 3 parts finished, missing 1" in status
    log = _ok(ragrepro(["-m", *PPL, THREE], env, timeout=600))
    run = work.name[len("tmp_"):]
    # the other parts are skipped, not recomputed: part 0 finds its part.json; part 1, the
    # last to finish, merges, so the job of part 2 finds the run finished
    assert f"part 0/3 of ralm/table1/{run} is already finished: skipping" in log
    assert f"Run part 1/3 of ralm/table1/{run}" in log
    assert f"Merged 3 parts into ralm/table1/{run} (9 samples)" in log
    assert f"Run ralm/table1/{run} is already finished: skipping" in log
    assert "Run part 0/3 of" not in log and "Run part 2/3 of" not in log
    done = json.loads((_run_dir(results, "ralm/table1") / "metrics.json").read_text())
    finished = done["metadata"]["shards"]["finished_at"]  # when each merged part was written
    assert finished[0] < before and finished[2] < before < finished[1]
    assert_same_ppl(results, unsharded_ppl)
    again = _ok(ragrepro(["-m", *PPL, THREE], env, timeout=600))  # finished: all skipped
    assert "Run part" not in again


@pytest.fixture(scope="module")
def unsharded_qa(tmp_path_factory):
    results = tmp_path_factory.mktemp("qa-unsharded") / "results"
    _ok(ragrepro(QA, base_env(results), timeout=600))
    return {**_read(results, "ralm/table4"), "root": results}


@pytest.mark.slow
def test_qa_parts_merged_by_command_give_identical_predictions(unsharded_qa, tmp_path):
    results = tmp_path / "results"
    env = base_env(results)
    _ok(ragrepro(["-m", *QA, "shard=0/3,2/3"], env, timeout=600))
    for merge in (["shards", "merge", "ralm/table4", "--results-dir", str(results)],
                  [*QA, "shard=merge"]):
        refused = ragrepro(merge, env)
        assert refused.returncode == 2, refused.stderr[-3000:]
        # the error names the missing part and the command that runs only it
        assert "part(s) 1 of 3 have not finished" in refused.stderr
        [command] = re.findall(r"`(ragrepro [^`]*)`", refused.stderr)
        assert sorted(command.split()[1:]) == sorted([*QA, "shard=1/3"])
    # part 1 finishes, its merge is killed after the CSV row
    killed = ragrepro([*QA, "shard=1/3"], {**env, "RAGREPRO_FAULT": "kill_in_commit=1"},
                      timeout=600)
    assert killed.returncode != 0
    assert "3 of 3 parts finished" in _ok(ragrepro(
        ["shards", "status", "ralm/table4", "--results-dir", str(results)], env))
    merged = _ok(ragrepro(["shards", "merge", "ralm/table4", "--results-dir", str(results)],
                          env))
    assert "merged" in merged
    got = _read(results, "ralm/table4")
    assert got["folder"].name == unsharded_qa["folder"].name
    assert [s["prediction"] for s in got["samples"]] == \
        [s["prediction"] for s in unsharded_qa["samples"]]
    assert [s["qid"] for s in got["samples"]] == [s["qid"] for s in unsharded_qa["samples"]]
    assert got["samples"] == unsharded_qa["samples"]  # prompts, outputs, scores, diagnostics
    assert got["metrics"]["metrics"] == unsharded_qa["metrics"]["metrics"]
    assert got["metrics"]["settings"] == unsharded_qa["metrics"]["settings"]
    assert got["metrics"]["metadata"]["example_prompt"] == \
        unsharded_qa["metrics"]["metadata"]["example_prompt"]
    assert got["metrics"]["metadata"]["shards"]["samples"] == [2, 2, 2]
    assert len(got["rows"]) == 1 and got["rows"][0]["em"] == unsharded_qa["rows"][0]["em"]
    def shown(root):  # `ragrepro samples`: every sample as a reader sees it
        return _ok(ragrepro(["samples", "ralm/table4", "--limit", "0", "--results", str(root)],
                            base_env(root)))

    assert shown(results) == shown(unsharded_qa["root"])
    assert "(6 shown of 6 matching, 6 samples)" in shown(results)


@pytest.mark.cluster
def test_slurm_sweep_of_parts_merges_to_the_unsharded_run(unsharded_ppl, slurm, tmp_path):
    results = tmp_path / "results"
    env = base_env(results, SLURM_CONF=str(slurm))
    log = _ok(ragrepro(["-m", *PPL, TWO, "hydra/launcher=slurm",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}"], env, timeout=900))
    assert "job ids" in log  # submitted as Slurm jobs
    job_logs = "".join(p.read_text() for p in (tmp_path / "sweep").rglob("*_log.*"))
    assert "Merged 2 parts into ralm/table1/" in job_logs  # by the last job to finish
    assert_same_ppl(results, unsharded_ppl)


@pytest.mark.cluster
def test_ray_sweep_of_parts_merges_to_the_unsharded_run(unsharded_ppl, ray_head, tmp_path):
    results = tmp_path / "results"
    log = _ok(ragrepro(["-m", *PPL, TWO, "hydra/launcher=ray",
                        f"hydra.launcher.ray.init.address={ray_head}"], base_env(results),
                       timeout=900))
    assert "(_run_job pid=" in log  # computed in Ray workers
    assert "Merged 2 parts into ralm/table1/" in log
    assert_same_ppl(results, unsharded_ppl)


# RICHES (constrained decoding, AutoAIS by the run's own LM) and FilCo (tiny T5: filter and
# generator fine-tuned, cached and shared by the parts) in 2 parts: RICHES 2 questions (about 4 s
# of constrained decoding each), FilCo 4 in generator batches of 2
METHODS = {
    "riches/main": ["experiment=riches/main", "limit=2", "dataset.hops=1",
                    "riches/method=riches", "riches/keys@riches.key=title",
                    "riches.autoais.judge_model=null", "riches.autoais.judge_threshold=null"],
    "filco/fig4": ["experiment=filco/fig4", "model=tiny-t5-random", "dataset=vital-qa",
                   "filco/variant=filco", "limit=4", "filco.gen_batch_size=2",
                   "filco.cxmi.batch_size=2"],
}


@pytest.mark.slow
@pytest.mark.parametrize("experiment", sorted(METHODS))
def test_riches_and_filco_parts_merge_to_the_unsharded_run(experiment, tmp_path):
    cell = METHODS[experiment]
    _ok(ragrepro(cell, base_env(tmp_path / "plain"), timeout=900))
    _ok(ragrepro(["-m", *cell, "shard=0/2,1/2"], base_env(tmp_path / "sharded"), timeout=900))
    a, b = _read(tmp_path / "plain", experiment), _read(tmp_path / "sharded", experiment)
    assert b["folder"].name == a["folder"].name
    n = 2 if experiment == "riches/main" else 4
    assert b["samples"] == a["samples"] and len(b["samples"]) == n
    assert b["metrics"]["metadata"]["shards"]["samples"] == [n // 2, n // 2]
    untimed = [{k: v for k, v in r["metrics"]["metrics"].items() if k not in TIMED}
               for r in (a, b)]
    assert untimed[0] == untimed[1]
    assert b["metrics"]["settings"] == a["metrics"]["settings"]
    assert b["files"] == a["files"]
    if experiment == "riches/main":  # attribution judged per question, merged from the parts
        assert "autoais_substitute" in untimed[1]
        assert (b["folder"] / "autoais.jsonl").read_text() == \
            (a["folder"] / "autoais.jsonl").read_text()
