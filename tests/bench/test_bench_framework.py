"""Benchmark framework: target evaluation, interleaved timing, CSV and summary writing."""
import csv
import importlib
import math
import sys
import time
from pathlib import Path

import pytest

from ragrepro.paths import REPO_ROOT

if str(REPO_ROOT) not in sys.path:  # benchmarks/ is run as `python -m benchmarks` from the root
    sys.path.insert(0, str(REPO_ROOT))
common = importlib.import_module("benchmarks.common")
bench = importlib.import_module("benchmarks.suite")
riches_index = importlib.import_module("benchmarks.riches_index")
BenchResult, interleaved_best, markdown_table, ratio_target, write_csv = (
    common.BenchResult, common.interleaved_best, common.markdown_table, common.ratio_target,
    common.write_csv)


def test_ratio_target_met_and_missed_with_gap():
    assert ratio_target("speed", 4.2, 3.0) == ("speed", True, "4.2x")
    _, met, detail = ratio_target("speed", 2.0, 3.0, why="head is small")
    assert not met
    assert "missed by 1.50x" in detail and "3x needed" in detail and "head is small" in detail
    # lower is better: 1.2 ms against a 1 ms ceiling is 1.2x too slow
    _, met, detail = ratio_target("lookup", 1.2, 1.0, " ms", higher_is_better=False)
    assert not met and "missed by 1.20x" in detail
    assert ratio_target("mem", 6.0, 6.0, " B", higher_is_better=False)[1]


def test_interleaved_best_alternates_and_keeps_minimum():
    calls = []
    sleeps = {"a": iter([0.03, 0.0]), "b": iter([0.0, 0.02])}

    def make(name):
        def f():
            calls.append(name)
            time.sleep(next(sleeps[name]))
            return name.upper()
        return f

    best, vals = interleaved_best({"a": make("a"), "b": make("b")}, repeat=2)
    assert calls == ["a", "b", "a", "b"]
    assert vals == {"a": "A", "b": "B"}
    assert best["a"] < 0.02 and best["b"] < 0.015


def test_markdown_table_formats_floats_and_missing():
    lines = markdown_table([{"x": 1.23456789, "y": None}, {"x": 2, "y": "z"}])
    assert lines[0] == "| x | y |"
    assert lines[1] == "|---|---|"
    assert lines[2] == "| 1.235 |  |"
    assert lines[3] == "| 2 | z |"
    assert markdown_table([]) == []


def test_write_csv_unions_columns(tmp_path):
    write_csv(tmp_path / "r.csv", [{"a": 1}, {"a": 2, "b": 3}])
    with open(tmp_path / "r.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows == [{"a": "1", "b": ""}, {"a": "2", "b": "3"}]


def test_section_marks_missed_targets():
    res = BenchResult("demo", [], ["some figure"], [("fast", True, "5x"), ("small", False, "9 B")])
    text = "\n".join(bench.section(res, 12.0, cpu="Some CPU"))
    assert text.startswith("## demo\n\n(ran in 12 s on Some CPU, load average ")
    assert "| fast | yes | 5x |" in text and "| small | **no** | 9 B |" in text


def test_selected_skip_and_unknown():
    assert bench.selected([], ["table1"])[-1] != "table1"
    assert "table1" not in bench.selected([], ["table1"])
    assert list(bench.BENCHMARKS)[-1] == "table1"  # the slowest runs last
    assert bench.selected(["loading"], []) == ["loading"]
    with pytest.raises(SystemExit, match="unknown"):
        bench.selected(["nope"], [])
    # the test suite's timing runs only when named (make bench stays about 20 minutes)
    assert "tests" not in bench.selected([], []) and bench.selected(["tests"], []) == ["tests"]


def test_split_sections_keeps_benchmarks_not_machine():
    text = "# B\n\n## Machine\n- cpu\n## ralm_throughput\nfig 1\n## cxmi\nfig 2\n"
    s = bench.split_sections(text)
    assert set(s) == {"ralm_throughput", "cxmi"}
    assert s["cxmi"] == ["## cxmi", "fig 2"]


def test_log_growth():
    # constant time -> ratio below 1 (log n itself grows); linear time over 1M->50M -> ~39
    flat = [{"n_tokens": 10**6, "t": 1.0}, {"n_tokens": 5 * 10**7, "t": 1.0}]
    assert riches_index.log_growth(flat, "t") == pytest.approx(math.log(1e6) / math.log(5e7))
    lin = [{"n_tokens": 10**6, "t": 1.0}, {"n_tokens": 5 * 10**7, "t": 50.0}]
    assert riches_index.log_growth(lin, "t") == pytest.approx(50 * math.log(1e6) / math.log(5e7))


def test_main_writes_csv_and_readme(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path))
    monkeypatch.setitem(bench.BENCHMARKS, "loading",
                        lambda: BenchResult("model_loading", [{"model": "m", "cached_s": 1.5}],
                                            ["| m | 1.5 |"], [("cached < 5 s", True, "1.5 s")]))
    monkeypatch.setattr(bench, "matmul_peak_gflops", lambda dtype: 100.0)
    bench.main(["loading"])
    readme = (tmp_path / "bench" / "README.md").read_text()
    assert "## Machine" in readme and "torch" in readme and "100 GFLOP/s" in readme
    assert "## model_loading" in readme and "| cached < 5 s | yes | 1.5 s |" in readme
    assert (tmp_path / "bench" / "model_loading.csv").read_text().startswith("model,cached_s")
    # a later subset keeps the earlier section, marked as older
    monkeypatch.setitem(bench.BENCHMARKS, "cxmi", lambda: BenchResult("cxmi", [{"x": 1}], [], []))
    bench.main(["cxmi"])
    readme = (tmp_path / "bench" / "README.md").read_text()
    assert "## cxmi" in readme and "## model_loading" in readme
    assert readme.count("(from an earlier `make bench`)") == 1
    bench.main(["cxmi"])  # rewriting does not pile up markers or blank lines
    again = (tmp_path / "bench" / "README.md").read_text()
    assert again.count("(from an earlier `make bench`)") == 1
    assert "\n\n\n" not in again


def test_failing_benchmark_is_reported_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path))

    def boom():
        raise RuntimeError("kaputt")

    monkeypatch.setitem(bench.BENCHMARKS, "cxmi", boom)
    monkeypatch.setattr(bench, "matmul_peak_gflops", lambda dtype: 1.0)
    bench.main(["cxmi"])
    readme = (tmp_path / "bench" / "README.md").read_text()
    assert "## cxmi" in readme and "FAILED" in readme and "kaputt" in readme


def test_table1_benchmark_runs_the_readme_command_in_a_clean_clone(monkeypatch):
    import sys

    from benchmarks import table1

    monkeypatch.setenv("RAGREPRO_RESULTS", "/somewhere/results")
    monkeypatch.setenv("VIRTUAL_ENV", "/work/.venv")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    bindir = str(Path(sys.executable).parent)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin")
    env = table1.clean_env()
    # the clone must build its own venv and write its own results/, as a new user's does
    assert "RAGREPRO_RESULTS" not in env and "VIRTUAL_ENV" not in env
    assert env["PATH"] == "/usr/bin" and "WANDB_MODE" not in env
    makefile = (REPO_ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("reproduce-table1: setup"):].split("\n\n")[0]
    assert "ragrepro -m experiment=ralm/table1" in recipe and "-m ralm.table1 ralm/table1" in recipe


def test_bench_logs_name_the_clone_not_the_machines_folders(tmp_path):
    from benchmarks import table1

    log = tmp_path / "table1.log"
    log.write_text("$ git clone /home/me/ragrepro /tmp/x/ragrepro\nRun -> /tmp/x/ragrepro/results\n")
    table1.name_paths(log, {"/tmp/x/ragrepro": "<clone>", "/home/me/ragrepro": "<repo>"})
    assert log.read_text() == "$ git clone <repo> <clone>\nRun -> <clone>/results\n"


def test_work_seconds_sum_the_model_work_bars_at_100_percent_once_each():
    from benchmarks import table1

    log = ("ralm smollm2-135m none:  28%|██▊       | 16/58 [00:07<00:19,  2.19win/s]\r"
           "ralm smollm2-135m none: 100%|██████████| 58/58 [00:24<00:00,  2.40win/s]\r"
           "ralm smollm2-135m none: 100%|██████████| 58/58 [00:24<00:00,  2.38win/s]\n"
           "label reranker data: 100%|██████████| 15/15 [01:57<00:00,  7.83s/batch]\n"
           "train reranker: 100%|██████████| 60/60 [1:02:04<00:00, 62.08s/step]\n"
           "Converting and de-quantizing GGUF tensors...: 100%|█| 272/272 [00:02<00:00]\n"
           "Loading weights: 100%|██████████| 272/272 [00:00<00:00, 16300.20it/s]\n")
    # 24 s once (the final refresh repeats the bar), 1:57 = 117 s, 1:02:04 = 3,724 s; the
    # conversion and the weight loading are not model work
    assert table1.work_seconds(log) == {"ralm smollm2-135m none": 24,
                                        "label reranker data": 117, "train reranker": 3724}
