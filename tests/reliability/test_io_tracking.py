import csv
import json
import multiprocessing as mp

import pytest

from ragrepro.errors import DataError
from ragrepro.io import iter_jsonl, read_jsonl_tolerant
from ragrepro.tracking import Run, append_csv_row, read_csv, run_id_of, scrub_secrets


def test_malformed_jsonl_names_file_and_line(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"a": 1}\n{"a": 2\n')
    with pytest.raises(DataError, match=r"d\.jsonl:2: malformed JSON"):
        list(iter_jsonl(p))


def test_missing_field_and_non_utf8(tmp_path):
    p = tmp_path / "d.jsonl"
    p.write_text('{"question": "q"}\n')
    with pytest.raises(DataError, match=r"d\.jsonl:1: record lacks field\(s\) \['answers'\]"):
        list(iter_jsonl(p, required=("question", "answers")))
    q = tmp_path / "latin.jsonl"
    q.write_bytes(b'{"a": "ok"}\n{"a": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"latin\.jsonl:2: not valid UTF-8"):
        list(iter_jsonl(q))


def test_torn_checkpoint_line_is_dropped(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"i": 0}\n{"i": 1}\n{"i": 2, "nll"')
    assert [r["i"] for r in read_jsonl_tolerant(p)] == [0, 1]


def test_run_id_ignores_cosmetic_keys():
    a = {"model": {"name": "m"}, "seed": 0, "wandb": {"mode": "offline"}, "overwrite": False}
    b = {**a, "wandb": {"mode": "online"}, "overwrite": True}
    assert run_id_of(a) == run_id_of(b)
    assert run_id_of(a) != run_id_of({**a, "seed": 1})


def test_secrets_never_written():
    out = scrub_secrets({"wandb": {"api_key": "abc"}, "hf_token": "t", "ok": 1})
    assert out == {"wandb": {"api_key": "<redacted>"}, "hf_token": "<redacted>", "ok": 1}


def test_finish_moves_tmp_and_appends_one_row(tmp_path):
    run = Run("x/t", "abc", tmp_path)
    run.start()
    run.add_sample({"i": 0})
    assert run.work_dir.exists() and not run.is_finished()
    run.finish({"seed": 0}, {"m": 1.5}, {"model": "a"}, {"git_commit": "c"})
    assert run.is_finished() and not run.work_dir.exists()
    rows = read_csv(tmp_path / "x" / "t.csv")
    assert [(r["run_id"], r["m"], r["model"]) for r in rows] == [("abc", "1.5", "a")]
    assert json.loads((run.final_dir / "metrics.json").read_text())["metrics"] == {"m": 1.5}
    # a rerun of the same run id replaces its row rather than duplicating it
    append_csv_row(run.csv_path, {"run_id": "abc", "m": 2.0})
    assert [r["m"] for r in read_csv(run.csv_path)] == ["2.0"]


def _append_many(args):
    path, worker = args
    for i in range(25):
        append_csv_row(path, {"run_id": f"{worker}-{i}", "worker": worker, "i": i,
                              f"col{worker % 3}": i})


def test_parallel_appends_never_corrupt(tmp_path):
    path = tmp_path / "e.csv"
    # spawn, not fork: a fork of a pytest process that already runs threads (tqdm monitors,
    # torch) can inherit a held lock and hang; the full suite once did for 900 s here
    with mp.get_context("spawn").Pool(4) as pool:
        pool.map(_append_many, [(path, w) for w in range(4)])
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 100
    assert len({r["run_id"] for r in rows}) == 100
    assert all(r["worker"] and r["i"] for r in rows)


def test_token_count_settings_are_not_mistaken_for_secrets():
    cfg = {"ralm": {"doc_max_tokens": 64, "rerank_tokens": 16, "max_new_tokens": 8},
           "auth_token": "x", "token": "y", "access-token": "z"}
    out = scrub_secrets(cfg)
    assert out["ralm"] == {"doc_max_tokens": 64, "rerank_tokens": 16, "max_new_tokens": 8}
    assert out["auth_token"] == out["token"] == out["access-token"] == "<redacted>"
