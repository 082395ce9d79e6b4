"""Attestations (ragrepro/attest.py): an order-independent hash of a run's per-sample outputs,
recorded when a run is finalised, computed for older runs, shown by `ragrepro attest` and
`ragrepro samples`, compared with --check."""
from __future__ import annotations

import json
import math
import random

import pytest

from ragrepro import attest, evidence
from ragrepro.cli import user_errors_exit_2
from ragrepro.paths import REPO_ROOT
from ragrepro.report import attest_cli, sample_view
from ragrepro.results_check import check_experiment, scan
from ragrepro.run_files import read_metrics, read_records
from ragrepro.tracking import Run, read_csv

TABLE1_BUNDLE = evidence.bundle_path(REPO_ROOT / "results", "ralm/table1")
# The committed Table 1 runs (results/evidence/ralm/table1.jsonl.gz), hashed by scheme
# ragrepro-attestation-1: a change here is a change of the scheme or of the committed runs.
TABLE1 = {"039f4ef6e2df": "4429ad2ce6acff4d", "17f34de899e8": "1e57a58e173bc439",
          "258e1d7cc095": "df5a71a29451f350", "3a6380c206b9": "54abad1a1015daf9",
          "4c4dcae5673b": "d505ecc5f081d8ca", "584207668a0d": "53e78babdaa01cbf",
          "754a385413d9": "db8391d7bd0c32b7", "819253efa5a3": "0da270f0d45f4d69",
          "89cc9ed18f44": "fbb0525ac655a653", "8ed3bc34b535": "fc0871864ce9c2c2",
          "b9e310a10120": "51d305cb0540c563", "e0c2df25ca4f": "2b649d3e4bc6fdba"}

WINDOWS = [{"text": 0, "window": i, "begin": 16 * i, "n_scored": 16,
            "nll_sum": 40.0 + i / 3, "doc_pid": f"p{i}", "diag": {"no_document": i == 0}}
           for i in range(6)]
QUESTIONS = [{"qid": "q1", "prediction": "Paris", "answers": ["Paris"], "em": 1.0,
              "seconds": 0.51},
             {"qid": "q2", "prediction": "the Beatles.", "answers": ["The Beatles"],
              "em": 1.0, "generation": {"answer": {"finish": "eos", "output_tokens": 4}},
              "seconds": 0.73}]


def _finished(root, experiment, run_id, records, metrics=None):
    run = Run(experiment, run_id, root)
    run.start()
    for r in records:
        run.add_sample(r)
    run.finish({"name": experiment}, metrics or {"n": len(records)}, {"model": "m"},
               {"git_commit": "abc"})
    return run


def test_order_does_not_change_it():
    shuffled = list(WINDOWS)
    random.Random(3).shuffle(shuffled)
    assert shuffled != WINDOWS
    assert attest.attestation(shuffled) == attest.attestation(WINDOWS)
    # a record's own key order is not part of it either
    reordered = [dict(reversed(list(r.items()))) for r in WINDOWS]
    assert attest.attestation(reordered) == attest.attestation(WINDOWS)


@pytest.mark.parametrize("change", [
    lambda rs: rs[2].update(nll_sum=rs[2]["nll_sum"] + 1e-12),      # float noise in one NLL
    lambda rs: rs[4].update(doc_pid="p0"),                           # another document
    lambda rs: rs[0]["diag"].update(no_document=False),              # a nested output
    lambda rs: rs.pop(),                                             # a sample fewer
    lambda rs: rs.append(dict(rs[0])),                               # a sample twice
    lambda rs: rs[1].update(extra=None),                             # a field more
])
def test_any_changed_output_changes_it(change):
    changed = json.loads(json.dumps(WINDOWS))
    change(changed)
    assert attest.attestation(changed) != attest.attestation(WINDOWS)


def test_wall_time_is_not_an_output():
    slower = [{**q, "seconds": q["seconds"] * 3} for q in QUESTIONS]
    assert attest.attestation(slower) == attest.attestation(QUESTIONS)
    answered = [dict(q) for q in QUESTIONS]
    answered[0]["prediction"] = "paris"
    assert attest.attestation(answered) != attest.attestation(QUESTIONS)


def test_numbers_hash_by_value_and_survive_the_json_round_trip(tmp_path):
    assert attest.attestation([{"x": 1.0, "y": -0.0}]) == attest.attestation([{"x": 1, "y": 0}])
    assert attest.attestation([{"x": 0.1}]) != attest.attestation([{"x": math.nextafter(0.1, 1)}])
    assert attest.attestation([{"x": True}]) != attest.attestation([{"x": 1}])
    noisy = [{"qid": f"q{i}", "v": random.Random(i).random() * 10 ** random.Random(i).randint(-8, 8),
              "nan": float("nan"), "inf": float("-inf"), "big": 2.0 ** 60}
             for i in range(50)]
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in noisy))
    assert attest.samples_attestation(path) == attest.attestation(noisy)
    assert attest.attestation(read_records(path, finished=True)) == attest.attestation(noisy)


def test_a_finished_run_records_it_in_metrics_json_and_its_row(tmp_path):
    run = _finished(tmp_path, "x/qa", "r1", QUESTIONS)
    expected = attest.attestation(QUESTIONS)
    data = read_metrics(run.final_dir / "metrics.json")
    assert data["metadata"]["attestation"] == expected
    assert [r["attestation"] for r in read_csv(run.csv_path)] == [expected]
    assert attest.of_run(run.final_dir, data) == attest.Attested(expected, expected)
    # the row rebuilt from the folder is the row written: `ragrepro check` finds nothing
    assert scan(tmp_path, "x/qa").expected()["r1"]["attestation"] == expected
    assert check_experiment(tmp_path, "x/qa") == []


def test_a_run_without_samples_records_none(tmp_path):
    run = _finished(tmp_path, "x/none", "r1", [])
    data = read_metrics(run.final_dir / "metrics.json")
    assert "attestation" not in data["metadata"]
    assert "attestation" not in read_csv(run.csv_path)[0]
    assert attest.of_run(run.final_dir, data).shown() == "-"


def _table1(tmp_path):
    root = tmp_path / "unpacked"
    evidence.unpack(TABLE1_BUNDLE, root)
    return root


def test_table1_runs_hash_the_same_after_repacking(tmp_path):
    root = _table1(tmp_path)
    first = {line.run_id: line.attested for line in attest_cli.attest_lines(root, "ralm/table1", [])}
    assert {k: v.value for k, v in first.items()} == TABLE1
    assert all(v.recorded is None for v in first.values())  # older runs: computed here
    bundle = evidence.pack(root, "ralm/table1", tmp_path / "again.jsonl.gz")
    again = tmp_path / "again"
    evidence.unpack(bundle, again)
    second = {line.run_id: line.attested.value
              for line in attest_cli.attest_lines(again, "ralm/table1", [])}
    assert second == TABLE1
    assert len(set(TABLE1.values())) == 12


def _main(capsys, *argv):
    capsys.readouterr()
    status = user_errors_exit_2(lambda: attest_cli.main(list(argv)))
    out = capsys.readouterr()
    return status, out.out, out.err


def test_attest_prints_and_checks(tmp_path, capsys):
    root = _table1(tmp_path)
    status, out, _ = _main(capsys, "ralm/table1", "--results", str(root))
    lines = out.splitlines()
    assert status == 0 and lines[0].startswith("# ralm/table1: run_id  attestation  settings")
    assert "12 computed here" in lines[0]
    assert "039f4ef6e2df  4429ad2ce6acff4d  model=gemma3-270m rerank=first" in lines
    assert len(lines) == 13
    saved = tmp_path / "mine.txt"
    saved.write_text(out)
    status, out, _ = _main(capsys, "ralm/table1", "--results", str(root), "--check", str(saved))
    assert status == 0 and out.count(" same\n") == 12
    # the other machine got one run's outputs different
    saved.write_text(out.replace("4429ad2ce6acff4d", "0000000000000000"))
    status, out, _ = _main(capsys, "ralm/table1", "--results", str(root), "--check", str(saved))
    assert status == 1
    assert "039f4ef6e2df  4429ad2ce6acff4d  DIFFERS (expected 0000000000000000)" in out
    # one string against one run
    status, out, _ = _main(capsys, "ralm/table1", "--results", str(root), "--run", "039f",
                           "--check", "4429ad2ce6acff4d")
    assert (status, out) == (0, "039f4ef6e2df  4429ad2ce6acff4d  same\n")
    status, out, _ = _main(capsys, "ralm/table1", "--results", str(root), "--run", "17f3",
                           "--check", "4429ad2ce6acff4d")
    assert status == 1 and "DIFFERS" in out


def test_a_run_missing_on_one_side_is_not_the_same(tmp_path, capsys):
    root = _table1(tmp_path)
    saved = tmp_path / "theirs.txt"
    saved.write_text("039f4ef6e2df  4429ad2ce6acff4d  model=x\nffffffffffff  0123456789abcdef\n")
    status, out, _ = _main(capsys, "ralm/table1", "--results", str(root), "--check", str(saved))
    assert status == 1
    assert "039f4ef6e2df  4429ad2ce6acff4d  same" in out
    assert "ffffffffffff  -  missing here (expected 0123456789abcdef)" in out
    assert "17f34de899e8  1e57a58e173bc439  not in the --check file" in out


@pytest.mark.parametrize("argv, message", [
    (["--check", "not-a-hash"], "neither a file nor an attestation"),
    (["--run", "zzz"], "--run zzz: no run of ralm/table1"),
])
def test_bad_arguments_exit_2(tmp_path, capsys, argv, message):
    root = _table1(tmp_path)
    with pytest.raises(SystemExit) as e:
        _main(capsys, "ralm/table1", "--results", str(root), *argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_unknown_experiment_exits_2_with_did_you_mean(tmp_path, capsys):
    root = _table1(tmp_path)
    with pytest.raises(SystemExit) as e:
        _main(capsys, "ralm/tabel1", "--results", str(root))
    assert e.value.code == 2
    assert "Did you mean 'ralm/table1'" in capsys.readouterr().err


def test_samples_changed_after_the_run_finished_are_named(tmp_path, capsys, caplog):
    run = _finished(tmp_path, "x/qa", "r1", QUESTIONS)
    recorded = attest.attestation(QUESTIONS)
    status, out, _ = _main(capsys, "x/qa", "--results", str(tmp_path))
    assert status == 0 and f"r1  {recorded}  model=m" in out and "computed here" not in out
    edited = [dict(QUESTIONS[0], prediction="Lyon"), QUESTIONS[1]]
    (run.final_dir / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in edited))
    status, out, _ = _main(capsys, "x/qa", "--results", str(tmp_path))
    assert status == 1
    assert f"the run recorded {recorded}" in caplog.text


def test_samples_run_header_shows_it(tmp_path):
    _finished(tmp_path, "x/qa", "r1", QUESTIONS)
    text, _ = sample_view.render(tmp_path, "x/qa", {}, sample_view.Filters())
    header = text.splitlines()[0]
    assert header.startswith("== x/qa/r1  model=m attestation=")
    assert header.split("attestation=")[1].split()[0] == attest.attestation(QUESTIONS)
    # an older run (no recorded attestation) has it computed from its samples
    root = _table1(tmp_path)
    text, _ = sample_view.render(root, "ralm/table1", {}, sample_view.Filters(limit=1), "039f")
    assert "attestation=4429ad2ce6acff4d" in text.splitlines()[0]
