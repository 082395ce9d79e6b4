"""ragrepro.results_check (issue 28 item 4): the pure comparison of a CSV index against the
rows its run folders give, the repaired index, the readers of run files, and `ragrepro check`
on folders written by tracking.Run (leftovers, unfinished runs, live writers, exit codes)."""
from __future__ import annotations

import io
import json
import logging
import os
import time
from pathlib import Path

import pytest

from ragrepro import results_check as rc
from ragrepro.codeversion import check_resume
from ragrepro.errors import DataError
from ragrepro.results_check import CsvIndex, Problem
from ragrepro.run_files import read_metrics, read_records
from ragrepro.tracking import Run, read_csv

EXP = "x/t"
HEADER = ["run_id", "experiment", "finished_at", "m", "model"]


def _row(rid: str, m: str = "1.5", stamp: str = "2026-01-02T03:04:05") -> dict[str, str]:
    return {"run_id": rid, "experiment": EXP, "finished_at": stamp, "m": m, "model": "a"}


def _index(rows: list[list[str]], header: list[str] = HEADER) -> CsvIndex:
    return CsvIndex(Path("r/x/t.csv"), True, header, [(i + 2, f) for i, f in enumerate(rows)])


def _finished(root: Path, rid: str, metrics: dict | None = None, settings: dict | None = None,
              samples: int = 1) -> Run:
    run = Run(EXP, rid, root)
    run.start()
    for i in range(samples):
        run.add_sample({"idx": i})
    run.finish({"seed": 0}, metrics or {"m": 1.5}, settings or {"model": "a"},
               {"git_commit": "c"})
    return run


# ---- pure pieces ----------------------------------------------------------------------------
def test_values_are_compared_as_the_csv_stores_them():
    assert rc.as_csv_text({"a": None, "b": 0.1 + 0.2, "c": True, "d": [1, "x"], "e": 'q"'}) \
        == {"a": "", "b": "0.30000000000000004", "c": "True", "d": "[1, 'x']", "e": 'q"'}


def test_finished_at_is_never_compared_and_an_absent_column_equals_empty():
    csv_row = {"run_id": "r1", "finished_at": "t1", "m": "1.5", "gone": ""}
    folder = {"run_id": "r1", "finished_at": "t2", "m": "2.0", "new": ""}
    assert rc.differing(csv_row, folder) == [("m", "1.5", "2.0")]
    assert rc.differing({**csv_row, "m": "2.0"}, {**folder, "new": "7"}) == [("new", None, "7")]


def test_index_problems_name_each_row_and_spare_unfinished_runs():
    expected = {"r1": _row("r1"), "r3": _row("r3")}
    index = _index([list(_row("r1").values()),           # line 2: as the folder says
                    list(_row("r1").values()),           # line 3: a second row of r1
                    list(_row("r2", m="9").values()),    # line 4: r2 is unfinished (tmp_r2/)
                    list(_row("r9").values()),           # line 5: no folder at all
                    ["hello world"]])                    # line 6: garbage
    found = rc.index_problems(index, expected, untrusted=set(), unfinished={"r2"})
    assert [(p.kind, p.run_id) for p in found] == [
        ("duplicate_row", "r1"), ("row_without_run", "r9"), ("field_count", "hello world"),
        ("run_without_row", "r3")]
    assert found[0].detail == "r/x/t.csv:3: a second row of run r1"
    assert found[2].detail.startswith("r/x/t.csv:6: a row (naming no finished run) has 1 "
                                      "field(s), the header 5")
    assert all(p.repairable for p in found)
    assert found[1].line().endswith("; `--repair` drops the row.")


def test_a_differing_value_names_the_csv_the_run_and_the_column():
    index = _index([list(_row("r1", m="7").values())])
    (p,) = rc.index_problems(index, {"r1": _row("r1")}, set(), set())
    assert (p.kind, p.run_id, p.path) == ("value_differs", "r1", Path("r/x/t.csv"))
    assert p.detail == ("r/x/t.csv:2: run r1 differs from r/x/t/r1/metrics.json in 1 "
                        "column(s): m: CSV '7', folder '1.5'")
    assert p.repaired().endswith(": the row was rewritten from the folder.")


def test_a_garbage_column_is_unknown_and_not_compared():
    header = [*HEADER, "hello world"]
    index = _index([[*_row("r1").values(), ""]], header)
    (p,) = rc.index_problems(index, {"r1": _row("r1")}, set(), set())
    assert p.kind == "unknown_column" and "'hello world'" in p.detail


def test_a_header_without_the_runner_columns_is_bad_and_every_run_lacks_its_row():
    index = _index([["r1", "1.5"]], ["run_id", "m"])
    found = rc.index_problems(index, {"r1": _row("r1")}, set(), set())
    assert [p.kind for p in found] == ["bad_header", "run_without_row"]
    assert "no column experiment, finished_at" in found[0].detail


def test_an_absent_or_empty_index_only_lacks_rows():
    for index in (CsvIndex(Path("r/x/t.csv"), False), CsvIndex(Path("r/x/t.csv"), True)):
        assert [p.kind for p in rc.index_problems(index, {"r1": _row("r1")}, set(), set())] \
            == ["run_without_row"]
        assert rc.index_problems(index, {}, set(), set()) == []


def test_the_rebuilt_index_keeps_order_times_and_unfinished_rows():
    header = [*HEADER, "hello world"]
    expected = {"r1": _row("r1", stamp="2026-05-05T05:05:05"),
                "r3": _row("r3", stamp="2026-06-06T06:06:06")}
    index = _index([["r2", EXP, "2026-01-01T00:00:00", "9", "a", ""],   # unfinished: kept
                    ["r1", EXP, "garbage", "7", "a", ""],               # rebuilt, new time
                    ["r9", EXP, "2026-01-01T00:00:00", "1", "a", ""],   # no folder: dropped
                    ["r3", EXP, "2026-03-03T03:03:03", "1.5"]],         # cut: rebuilt
                   header)
    out_header, rows = rc.rebuilt_index(index, expected, kept={"r2"})
    assert out_header == HEADER  # the garbage column is gone, the order is the CSV's
    assert rows == [{"run_id": "r2", "experiment": EXP, "finished_at": "2026-01-01T00:00:00",
                     "m": "9", "model": "a", "hello world": ""},
                    _row("r1", stamp="2026-05-05T05:05:05"),   # 'garbage' is not a time
                    _row("r3", stamp="2026-03-03T03:03:03")]   # the CSV's own time kept


def test_the_rebuilt_index_appends_missing_runs_and_is_empty_without_rows():
    header, rows = rc.rebuilt_index(_index([]), {"r1": _row("r1")}, kept=set())
    assert header == HEADER and rows == [_row("r1")]
    assert rc.rebuilt_index(_index([["r9", EXP, "t", "1", "a"]]), {}, set()) == ([], [])


def test_read_index_notes_binary_garbage_and_keeps_reading(tmp_path):
    p = tmp_path / "t.csv"
    p.write_bytes(b"run_id,m\r\nr1,1\r\n\xffr2,2\r\nr3,3\x00\r\n")
    index = rc.read_index(p)
    assert index.unreadable == (3, "not valid UTF-8 at byte 16")
    assert index.header == ["run_id", "m"]
    assert index.rows == [(2, ["r1", "1"]), (3, ["\ufffdr2", "2"]), (4, ["r3", "3"])]
    p.write_bytes(b"run_id,m\r\nr1,1\x00\r\n")
    assert rc.read_index(p).unreadable == (2, "a NUL byte")


# ---- the readers of run files -----------------------------------------------------------------
def test_records_of_a_finished_run_must_be_whole(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    p = d / "samples.jsonl"
    p.write_bytes(b'{"i": 0}\n{"i": 1}\n{"i": 2, "nll')
    with pytest.raises(DataError, match=r"run/samples\.jsonl:3 is damaged \(malformed JSON at "
                                        r"column 10: .*delete the folder .*/run/ and rerun"):
        read_records(p, finished=True)
    p.write_bytes(b'{"i": 0}\n[1]\n{"i": 2}\n')
    with pytest.raises(DataError, match=r"samples\.jsonl:2 is damaged \(a JSON list"):
        read_records(p, finished=True)


def test_an_unfinished_run_drops_only_a_torn_last_line(tmp_path):
    d = tmp_path / "tmp_r1"
    d.mkdir()
    p = d / "samples.jsonl"
    # killed inside the two bytes of 'é': the last line does not even decode
    p.write_bytes(b'{"i": 0}\n{"i": 1}\n{"i": 2, "w": "caf\xc3')
    assert read_records(p, finished=False) == [{"i": 0}, {"i": 1}]
    p.write_bytes(b'{"i": 0}\n{"i": 1, "x\n{"i": 2}\n')
    with pytest.raises(DataError, match=r"tmp_r1/samples\.jsonl:2 is damaged \(malformed JSON"
                                        r".*only a torn last line is expected\)\. The "
                                        r"unfinished run cannot resume from it: delete the "
                                        r"folder .*tmp_r1/ \(or rerun with overwrite=true\)"):
        read_records(p, finished=False)


def test_damaged_code_json_of_an_unfinished_run_is_named(tmp_path):
    work = tmp_path / "tmp_r1"
    work.mkdir()
    (work / "samples.jsonl").write_text('{"i": 0}\n')
    (work / "code.json").write_text('{"versions": {"a": 1}}')
    with pytest.raises(DataError, match=r"tmp_r1/code\.json is damaged \('versions' is a JSON "
                                        r"object, not a list\).*overwrite=true"):
        check_resume(work, {"code_id": "k"}, allow=False)


def test_a_finished_run_missing_its_row_with_a_damaged_metrics_json_is_refused(tmp_path):
    run = _finished(tmp_path, "r1")
    run.csv_path.write_text("")  # the row is gone, so the skip would restore it
    (run.final_dir / "metrics.json").write_text('{"metrics": {}}')
    with pytest.raises(DataError, match=r"r1/metrics\.json is damaged \(no 'settings' key\)"):
        Run(EXP, "r1", tmp_path).is_finished()


def test_read_metrics_names_a_wrong_type(tmp_path):
    p = tmp_path / "r1" / "metrics.json"
    p.parent.mkdir()
    p.write_text(json.dumps({"metrics": [], "settings": {}}))
    with pytest.raises(DataError, match=r"\('metrics' is a JSON list, not an object\)"):
        read_metrics(p)


# ---- on disk ----------------------------------------------------------------------------------
def test_samples_shorter_than_the_runs_own_count_are_reported(tmp_path):
    _finished(tmp_path, "r1", settings={"model": "a", "n_examples": 3}, samples=2)
    _finished(tmp_path, "r2", settings={"model": "a", "n_examples": 2}, samples=2)
    (p,) = rc.check_experiment(tmp_path, EXP)
    assert (p.kind, p.run_id, p.repairable) == ("samples_short", "r1", False)
    assert "holds 2 records but the run counted 3 (settings.n_examples)" in p.detail


def test_a_folder_holding_another_run_is_misplaced(tmp_path):
    run = _finished(tmp_path, "r1")
    os.rename(run.final_dir, run.final_dir.with_name("r7"))
    kinds = sorted(p.kind for p in rc.check_experiment(tmp_path, EXP))
    # r7's row is missing and r1's row has no folder: both index problems, plus the move
    assert kinds == ["misplaced_run", "row_without_run", "run_without_row"]


def test_leftovers_are_found_and_removed(tmp_path):
    now = time.time()
    run = _finished(tmp_path, "r1")
    replaced = run.replaced_dir
    replaced.mkdir()
    old = run.final_dir / ".metrics.json.abc123xy"
    young = tmp_path / "x" / ".t.csv.zz99yy88"
    for p, age in ((old, 3600), (young, 5)):
        p.write_text("{")
        os.utime(p, (now - age, now - age))
    found = {(p.kind, p.path, p.repairable) for p in rc.check_experiment(tmp_path, EXP, now)}
    assert found == {("replaced_leftover", replaced, True), ("temp_file", old, True),
                     ("temp_file", young, False)}
    out = io.StringIO()
    assert rc.run_check(tmp_path, [EXP], True, False, out=out) == 1  # the young file stays
    assert not replaced.exists() and not old.exists() and young.exists()
    assert "not repaired: temp_file" in out.getvalue()
    os.utime(young, (now - 3600, now - 3600))
    assert rc.run_check(tmp_path, [EXP], True, False, out=io.StringIO()) == 0
    assert not young.exists() and rc.check_experiment(tmp_path, EXP) == []


def test_unfinished_runs_are_dropped_only_when_asked_and_never_while_a_writer_lives(tmp_path):
    now = time.time()
    _finished(tmp_path, "r1")
    for rid in ("r2", "r3"):
        run = Run(EXP, rid, tmp_path)
        run.start()
        run.add_sample({"idx": 0})
        for p in (run.work_dir, run.samples_path):
            os.utime(p, (now - 7200, now - 7200))
    (tmp_path / "x" / "t" / "r3.writer").write_text("{}")  # r3's writer is alive (fresh beat)
    found = {p.run_id: p for p in rc.check_experiment(tmp_path, EXP, now)}
    assert set(found) == {"r2", "r3"} and {p.kind for p in found.values()} == {"unfinished_run"}
    assert "last written 2.0 h ago" in found["r2"].detail and not found["r2"].repairable
    assert "a live writer holds it (r3.writer)" in found["r3"].detail
    assert rc.run_check(tmp_path, [EXP], True, False, out=io.StringIO()) == 0  # left alone
    assert (tmp_path / "x" / "t" / "tmp_r2").exists()
    out = io.StringIO()
    assert rc.run_check(tmp_path, [EXP], True, True, out=out) == 1
    assert not (tmp_path / "x" / "t" / "tmp_r2").exists()
    assert (tmp_path / "x" / "t" / "tmp_r3").exists()
    assert "not repaired: unfinished_run" in out.getvalue()


def test_the_check_command_exit_codes(tmp_path, capsys):
    _finished(tmp_path, "r1")
    with pytest.raises(SystemExit) as clean:
        rc.main(["--results-dir", str(tmp_path)])
    assert clean.value.code == 0
    assert capsys.readouterr().out == (f"checked 1 experiment(s) under {tmp_path}: 0 "
                                       f"problem(s), 0 repairable\n")
    for argv, message in ((["nope/exp"], "no experiment nope/exp under"),
                          (["--drop-unfinished"], "only applies with --repair"),
                          (["--results-dir", str(tmp_path / "absent")], "no results folder")):
        with pytest.raises(SystemExit) as usage:
            rc.main([*argv, "--results-dir", str(tmp_path)] if "--results-dir" not in argv
                    else argv)
        assert usage.value.code == 2
        assert message in capsys.readouterr().err
    (tmp_path / "x" / "t.csv").write_text("")
    with pytest.raises(SystemExit) as found:
        rc.main([EXP, "--results-dir", str(tmp_path)])
    assert found.value.code == 1
    assert f"{EXP}: run_without_row: {tmp_path}/x/t.csv: the finished run" \
        in capsys.readouterr().out


def test_experiments_under_a_results_folder(tmp_path):
    _finished(tmp_path, "r1")
    Run("a/b/c", "r2", tmp_path).start()                       # only unfinished
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "t.csv").write_text("run_id,experiment,finished_at\n")
    (tmp_path / "bench.csv").write_text("name,seconds\n")      # not an index
    assert rc.experiments_under(tmp_path) == ["a/b/c", EXP]


def test_a_read_only_results_folder_is_read_with_the_folders_values(tmp_path, monkeypatch,
                                                                     caplog):
    run = _finished(tmp_path, "r1")
    text = run.csv_path.read_text().replace(",1.5,", ",7,")
    run.csv_path.write_text(text)

    def refuse(path, data):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(rc, "atomic_write_text", refuse)
    with caplog.at_level(logging.WARNING):
        rows, checked = rc.validated_rows(tmp_path, EXP)
    assert checked and [r["m"] for r in rows] == ["1.5"]
    assert run.csv_path.read_text() == text  # unchanged
    assert "m: CSV '7', folder '1.5'" in caplog.text and "Could not rewrite" in caplog.text
    assert [r["m"] for r in read_csv(run.csv_path)] == ["7"]


def test_problem_line_carries_the_fix_only_for_the_index():
    damaged = Problem("damaged_file", Path("m.json"), "r1", "m.json is damaged (x).", False)
    assert damaged.line() == "damaged_file: m.json is damaged (x)."
    cut = Problem("field_count", Path("t.csv"), "r1", "t.csv:2: a row", True)
    assert cut.line() == ("field_count: t.csv:2: a row; `--repair` rebuilds the row from its "
                          "folder (drops it without one).")
