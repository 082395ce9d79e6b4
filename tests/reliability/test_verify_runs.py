"""`ragrepro verify --runs`: this machine's runs against the committed evidence bundle, record
by record: bits, float noise, numbers beyond noise, or other outputs."""
import json
import platform
import shutil

import pytest

from ragrepro import evidence, verify, verify_runs
from ragrepro.errors import RagreproError
from ragrepro.metadata import cpu_model
from ragrepro.verify_runs import Field, check_run, compare_values, relative

NOISE = 1e-5


def _metrics(nll: float, cpu: str) -> str:
    return json.dumps({"run_id": "r1", "metrics": {"nll_sum": nll, "n_windows": 2},
                       "metadata": {"machine": {"cpu": cpu, "torch_threads": 2}},
                       "timings_s": {"total": 3.0}})


def _samples(*rows) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _files(nll=(10.0, 0.5), chosen="Paris", seconds=1.0, cpu="AMD EPYC (avx2)"):
    return {"metrics.json": _metrics(sum(nll), cpu),
            "samples.jsonl": _samples({"window": 0, "nll_sum": nll[0], "seconds": seconds},
                                      {"window": 1, "nll_sum": nll[1], "seconds": seconds}),
            "retrievals.jsonl": _samples({"window": 1, "chosen": chosen, "score": 7.25})}


def test_relative_difference_is_held_to_one_below_magnitude_one():
    assert relative(100.0, 100.001) == pytest.approx(0.001 / 100.001)
    assert relative(0.5, 0.500004) == pytest.approx(4e-6)   # not 8e-6: below 1, absolute
    assert relative(0.0, 0.0) == 0.0
    assert relative(float("nan"), float("nan")) == 0.0
    assert relative(float("nan"), 1.0) == float("inf")


def test_numbers_are_counted_by_field_and_other_values_named():
    t = compare_values({"a": [1.0, 2.0], "b": "x", "n": 3, "seconds": 9.0},
                       {"a": [1.0, 2.00001], "b": "y", "n": 3, "seconds": 1.0}, "s", NOISE)
    # 2.0 vs 2.00001: 1e-5 / 2.00001 = 5.0e-6 relative, within noise; seconds skipped
    assert dict(t.fields) == {"s.a": Field(n=2, noisy=1, beyond=0,
                                           max_abs=pytest.approx(1e-5),
                                           max_rel=pytest.approx(1e-5 / 2.00001))}
    assert t.changed == ('s.b ("x" here, "y" committed)',) and t.n_changed == 1
    ints = compare_values({"n": 3}, {"n": 4}, "s", NOISE)  # a count is not a float
    assert ints.n_changed == 1 and ints.fields == ()
    assert compare_values([1, 2], [1], "s", NOISE).changed == ("s (2 items here, 1 committed)",)
    assert compare_values({"k": 1.0}, {}, "s", NOISE).changed == ("s.k (only here)",)


@pytest.mark.parametrize("here, status", [
    (_files(), "same bits"),
    (_files(seconds=5.0, cpu="Intel Xeon (avx512f)"), "same bits"),   # wall clock, machine
    (_files(nll=(10.00002, 0.5)), "float noise"),                     # 2e-6 relative
    (_files(nll=(10.01, 0.5)), "numbers beyond noise"),               # 1e-3 relative
    (_files(chosen="Lyon"), "differs"),                               # another document
])
def test_run_status(here, status):
    assert check_run(here, _files(), "r1", NOISE).status == status


def test_the_line_names_what_is_beyond_noise_and_the_machines():
    c = check_run(_files(nll=(10.01, 0.5), cpu="Intel Xeon (avx512f)"), _files(), "r1", NOISE)
    assert c.cpu_here == "Intel Xeon (avx512f), 2 torch threads"
    assert c.cpu_committed == "AMD EPYC (avx2), 2 torch threads"
    assert c.records == 3
    assert c.line() == (
        "r1: numbers beyond noise, 3 records, 4 numbers (2 equal, 0 within noise, 2 beyond), "
        "beyond noise: metrics.nll_sum 1/1 (largest difference 0.01); samples.nll_sum 1/2 "
        "(largest difference 0.01)")


def _write_run(root, experiment, run_id, files):
    folder = root / experiment / run_id
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_experiment_against_its_bundle_and_the_cli(tmp_path, monkeypatch, capsys):
    committed, here = tmp_path / "committed", tmp_path / "results"
    _write_run(committed, "ralm/table1", "aaa", _files())
    _write_run(committed, "ralm/table1", "bbb", _files())
    bundle = evidence.pack(committed, "ralm/table1")
    (here / "evidence" / "ralm").mkdir(parents=True)
    shutil.copy(bundle, here / "evidence" / "ralm" / "table1.jsonl.gz")
    monkeypatch.setenv("RAGREPRO_RESULTS", str(here))
    with pytest.raises(RagreproError, match="no finished runs here"):
        verify_runs.check_experiment(here, "ralm/table1")
    _write_run(here, "ralm/table1", "aaa", _files(nll=(10.00002, 0.5)))
    _write_run(here, "ralm/table1", "ccc", _files())
    checks = verify_runs.check_experiment(here, "ralm/table1")
    assert [(c.run_id, c.status) for c in checks] == [
        ("aaa", "float noise"), ("bbb", "not run here"), ("ccc", "not committed")]
    assert verify.main(["--runs", "ralm/table1"]) == 1  # bbb was not run here
    out = capsys.readouterr().out
    assert "== ralm/table1: 0 same bits, 1 float noise, 0 numbers beyond noise, 0 differs, " \
           "1 not run here, 1 not committed (noise: relative 1e-05)" in out
    shutil.rmtree(committed / "ralm" / "table1" / "bbb")
    shutil.copy(evidence.pack(committed, "ralm/table1"),
                here / "evidence" / "ralm" / "table1.jsonl.gz")
    assert verify.main(["--runs", "ralm/table1"]) == 0
    assert verify.main(["--runs", "ralm/table1", "--noise", "1e-7"]) == 0  # beyond: not a fail
    assert "numbers beyond noise" in capsys.readouterr().out
    assert verify.main(["--runs", "ralm/table1", "--noise", "2"]) == 2
    assert "--noise 2 must be" in capsys.readouterr().err
    assert verify.main(["--runs", "riches/main"]) == 2
    assert "no committed evidence bundle" in capsys.readouterr().err


def test_cpu_model_names_the_widest_vector_extension():
    intel = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse4_2 " \
            "avx avx2 avx512f\n\nprocessor\t: 1\nmodel name\t: other\n"
    assert cpu_model(intel) == "Intel(R) Xeon(R) Processor (avx512f)"
    assert cpu_model("model name\t: AMD EPYC 7B13\nflags\t: sse4_2 avx avx2\n") == \
        "AMD EPYC 7B13 (avx2)"
    arm = "processor\t: 0\nFeatures\t: fp asimd\n"  # no model name, no flags line
    assert cpu_model(arm) == (platform.processor() or platform.machine())


def test_the_markdown_record_keeps_summaries_and_run_lines():
    tables = ("== t.md against HEAD\n  table 1 row 1 (a) b: same as committed\n"
              "== t.md: 1 cells same as committed, 0 within tolerance, 0 differ\n")
    runs = "== runs of e against x\n  r1: float noise\n== e: 1 float noise\n"
    assert verify.record("ragrepro verify t.md --runs e", tables, runs, cpu="Intel X (avx512f)") \
        == ("# ragrepro verify\n\nWritten by `ragrepro verify t.md --runs e` on a machine with "
            "Intel X (avx512f).\n\n## Verdicts\n\n```\n"
            "== t.md: 1 cells same as committed, 0 within tolerance, 0 differ\n"
            "== runs of e against x\n  r1: float noise\n== e: 1 float noise\n```\n")
