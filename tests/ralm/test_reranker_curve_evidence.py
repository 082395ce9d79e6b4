"""The reranker learning curve's per-example evidence (scripts/reranker_curve.py): the run
writes, per n, every input of `summarise` to <csv stem>_heldout.jsonl.gz; `--from-evidence`
rebuilds the CSV and the Markdown from that file alone, byte for byte; the numbers are the
hand-computed ones; a damaged file is refused by name; a rerun keeps the lines of the sizes it
skips. No model: fake labeller and trainer, everything under tmp_path."""
import csv
import gzip
import json
import logging
import shutil

import numpy as np
import pytest

from ragrepro.errors import DataError
from scripts import reranker_curve as rc
from scripts.reranker_curve_report import write_markdown

SETTINGS = "Settings: a fixed sentence for the tests."
K = 4
HEADER = {"format": "ragrepro-reranker-curve", "version": 1}
# Five held-out examples, k = 4. The LM's best document (highest loglik) per example:
BEST = [0, 1, 2, 3, 1]
HELD = [  # zero-shot picks (highest score): 0 (agrees), 2, 2 (agrees), 0, 3: 2 of 5 agree
    {"loglik": [-1.1, -2.2, -3.3, -4.4], "zeroshot": [-0.5, -0.7, -0.9, -0.6]},
    {"loglik": [-5.0, -1.7, -3.0, -4.0], "zeroshot": [-2.0, -1.5, -0.3, -4.0]},
    {"loglik": [-4.0, -3.0, -0.1, -2.0], "zeroshot": [-1.0, -2.0, -0.2, -3.0]},
    {"loglik": [-3.0, -2.0, -4.0, -1.3], "zeroshot": [-0.4, -1.0, -2.0, -3.0]},
    {"loglik": [-2.0, -1.5, -3.0, -9.0], "zeroshot": [-3.0, -2.0, -1.0, -0.1]},
]
LOSS_UNTRAINED = np.array([2.5, 2.6, 2.7, 2.8, 2.9])  # mean 2.7


def fake_scores(n: int) -> rc.HeldoutScores:
    """Trained at n: the first min(n // 2, 5) examples pick the LM's best document, the others
    the next one (so top-1 agreement is min(n // 2, 5) / 5); untrained always picks doc 3
    (agrees on example 3 only: 1/5). float32, as the model's scores are."""
    agree = min(n // 2, len(HELD))
    trained = np.full((len(HELD), K), 0.1, dtype=np.float32)
    for i, best in enumerate(BEST):
        trained[i, best if i < agree else (best + 1) % K] = 0.9
    untrained = np.tile(np.array([0.3, 0.2, 0.1, 0.7], dtype=np.float32), (len(HELD), 1))
    loss_trained = np.array([1.3, 0.7, 2.1, 0.4, 1.9]) + 1 / n
    return rc.HeldoutScores(trained, untrained, loss_trained, LOSS_UNTRAINED.copy())


class Curve:
    """run_curve on fake callables, with the .md written after each row as main's report()
    writes it (held-out examples from the label cache)."""

    def __init__(self, root):
        self.cache = root / "cache" / "labels.jsonl"
        self.csv = root / "out" / "curve.csv"
        self.evidence = root / "out" / "curve_heldout.jsonl.gz"
        self.labelled: list[int] = []
        self.trained: list[tuple[int, int, int]] = []

    def label(self, i: int) -> list[dict]:
        self.labelled.append(i)
        if i == 0:  # the held-out chunk; "prefix"/"docs" stand for the fields not kept
            return [dict(e, prefix=f"p{j}", docs=["d"] * K) for j, e in enumerate(HELD)]
        return [{"prefix": f"t{i}.{j}", "docs": ["d"] * K, "loglik": [-1.0] * K,
                 "zeroshot": [-1.0] * K} for j in range(3)]

    def train_eval(self, rows: list[dict], held: list[dict], steps: int) -> rc.HeldoutScores:
        self.trained.append((len(rows), len(held), steps))
        return fake_scores(len(rows))

    def report(self, settings: str = SETTINGS) -> None:
        held = [e for c in rc.read_chunks(self.cache)[:1] for e in c["examples"]]
        write_markdown(self.csv, settings, held)

    def run(self, sizes: list[int], settings: str = SETTINGS, machine: str = "") -> None:
        rc.run_curve(sizes, self.cache, self.csv, heldout_chunks=1, max_chunks=100,
                     label_chunk=self.label, train_eval=self.train_eval, epochs=2.0,
                     batch_size=4, after_row=lambda: self.report(settings), machine=machine)

    def lines(self) -> list[dict]:
        return [json.loads(x) for x in gzip.decompress(self.evidence.read_bytes()).splitlines()]

    def rows(self) -> dict[int, dict]:
        with self.csv.open() as f:
            return {int(r["n_train"]): r for r in csv.DictReader(f)}


@pytest.fixture
def curve(tmp_path):
    return Curve(tmp_path)


def test_evidence_file_holds_the_header_and_each_sizes_arrays(curve):
    curve.run([7, 4])
    assert rc.evidence_path(curve.csv) == curve.evidence
    header, *lines = curve.lines()
    assert header == HEADER
    assert [x["n_train"] for x in lines] == [4, 7] and [x["steps"] for x in lines] == [2, 4]
    assert [x["epochs"] for x in lines] == [2.0, 2.0]
    assert all(x["train_s"] >= 0 and x["label_s_per_example"] >= 0 for x in lines)
    for line in lines:
        want = fake_scores(line["n_train"])
        held = line["heldout"]
        assert [sorted(e) for e in held] == [sorted(rc.SCORE_KEYS + rc.LOSS_KEYS)] * len(HELD)
        assert [e["loglik"] for e in held] == [e["loglik"] for e in HELD]
        assert [e["zeroshot"] for e in held] == [e["zeroshot"] for e in HELD]
        assert [e["trained"] for e in held] == want.trained.astype(float).tolist()
        assert [e["untrained"] for e in held] == want.untrained.astype(float).tolist()
        assert [e["loss_trained"] for e in held] == want.loss_trained.tolist()
        assert [e["loss_untrained"] for e in held] == LOSS_UNTRAINED.tolist()
    # deterministic: keys sorted, gzip time 0, the same lines give the same bytes
    raw = gzip.decompress(curve.evidence.read_bytes()).decode().splitlines()
    assert raw == [json.dumps(x, sort_keys=True) for x in [header, *lines]]
    assert curve.evidence.read_bytes()[4:8] == b"\0\0\0\0"
    again = curve.evidence.with_name("again.jsonl.gz")
    rc.write_evidence(again, lines)
    assert again.read_bytes() == curve.evidence.read_bytes()
    assert sorted(p.name for p in curve.evidence.parent.iterdir()) == \
        ["again.jsonl.gz", "curve.csv", "curve.md", "curve_heldout.jsonl.gz"]  # no temp file


def test_from_evidence_rebuilds_the_csv_and_md_byte_for_byte(curve):
    curve.run([4, 7])
    md = curve.csv.with_suffix(".md")
    written_csv, written_md = curve.csv.read_bytes(), md.read_bytes()
    assert b"Label margins on the held-out examples" in written_md
    curve.csv.unlink()
    md.unlink()
    curve.cache.unlink()  # neither the label cache nor a model is needed
    rc.rebuild_from_evidence(curve.csv, SETTINGS)
    assert curve.csv.read_bytes() == written_csv
    assert md.read_bytes() == written_md


def test_agreement_in_the_csv_is_the_hand_computed_fraction(curve):
    curve.run([4, 7])
    rows = curve.rows()
    # n=4: 4 // 2 = 2 of 5 examples agree; n=7: 3 of 5
    assert rows[4]["agree_trained"] == "0.4000" and rows[7]["agree_trained"] == "0.6000"
    for r in rows.values():
        assert r["agree_zeroshot"] == "0.4000"    # examples 0 and 2
        assert r["agree_untrained"] == "0.2000"   # example 3 (doc 3)
        assert r["agree_first"] == "0.2000"       # example 0 (doc 0)
        assert r["chance"] == "0.2500" and r["k"] == "4" and r["n_heldout"] == "5"
        assert r["loss_untrained"] == "2.7000"
    assert rows[4]["trained_minus_zeroshot"] == "0.0000"
    assert rows[7]["trained_minus_zeroshot"] == "0.2000"
    assert rows[7]["loss_trained"] == f"{np.mean([1.3, 0.7, 2.1, 0.4, 1.9]) + 1 / 7:.4f}"


def _gz(text: str) -> bytes:
    return gzip.compress(text.encode(), mtime=0)


def _line(n: int) -> str:
    held = [{"loglik": [-1.0, -2.0], "zeroshot": [0.0, 1.0], "trained": [1.0, 0.0],
             "untrained": [0.0, 0.0], "loss_trained": 1.0, "loss_untrained": 2.0}]
    return json.dumps({"n_train": n, "steps": 1, "epochs": 2.0, "train_s": 1.0,
                       "label_s_per_example": 0.5, "heldout": held}) + "\n"


HEAD = json.dumps(HEADER) + "\n"
DAMAGED = {
    "not gzip": b"n_train,steps\n4,2\n",
    "truncated gzip": _gz(HEAD + _line(4))[:-12],
    "torn line": _gz(HEAD + _line(4) + _line(7)[:40]),
    "wrong header": _gz(json.dumps({"format": "ragrepro-evidence", "version": 1}) + "\n"
                        + _line(4)),
    "newer version": _gz(json.dumps({"format": HEADER["format"], "version": 2}) + "\n"),
    "no heldout": _gz(HEAD + _line(4).replace('"heldout"', '"held"')),
    "ragged scores": _gz(HEAD + _line(4).replace('"trained": [1.0, 0.0]', '"trained": [1.0]')),
    "n twice": _gz(HEAD + _line(4) + _line(4)),
    "no curve line": _gz(HEAD),
}


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_a_damaged_evidence_file_is_refused_by_name(curve, damage):
    curve.evidence.parent.mkdir(parents=True)
    curve.evidence.write_bytes(DAMAGED[damage])
    with pytest.raises(DataError) as e:
        rc.rebuild_from_evidence(curve.csv, SETTINGS)
    assert str(curve.evidence) in str(e.value) and "make reranker-curve" in str(e.value)
    assert not curve.csv.exists()


def test_a_missing_evidence_file_is_refused_and_a_damaged_one_stops_a_run(curve):
    with pytest.raises(DataError, match="no reranker-curve evidence file"):
        rc.rebuild_from_evidence(curve.csv, SETTINGS)
    curve.evidence.parent.mkdir(parents=True)
    curve.evidence.write_bytes(DAMAGED["torn line"])
    with pytest.raises(DataError, match="line 3 is torn"):
        curve.run([4])
    assert curve.labelled == [] and curve.trained == []  # refused before any work


def test_the_command_line_exits_2_with_one_error_line(curve, capsys):
    curve.evidence.parent.mkdir(parents=True)
    curve.evidence.write_bytes(DAMAGED["not gzip"])
    with pytest.raises(SystemExit) as e:
        rc.main(["--from-evidence", "--out", str(curve.csv)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1 and str(curve.evidence) in errors[0] and "Traceback" not in err


def test_the_command_line_rebuilds_with_the_composed_settings(curve):
    """main --from-evidence composes the config only for the settings sentence (no model);
    the machine it names is the one the curve ran on, kept in the evidence, not the
    rebuilding machine's."""
    from scripts.reranker_curve_report import settings_line

    ran_on = "Some CPU (avx2), 1 torch thread(s)"
    curve.run([4, 7], settings=settings_line(rc.compose_cfg([]), 2.0, ran_on), machine=ran_on)
    assert f"Machine: {ran_on}, float32." in curve.csv.with_suffix(".md").read_text()
    written = curve.csv.read_bytes(), curve.csv.with_suffix(".md").read_bytes()
    curve.csv.unlink()
    curve.csv.with_suffix(".md").unlink()
    rc.main(["--from-evidence", "--out", str(curve.csv)])
    assert (curve.csv.read_bytes(), curve.csv.with_suffix(".md").read_bytes()) == written


def test_a_rerun_skipping_a_finished_size_keeps_its_evidence_line(curve):
    curve.run([4])
    first = curve.lines()
    curve.run([4, 7])
    assert curve.trained == [(4, 5, 2), (7, 5, 4)]  # n=4 not trained again
    lines = curve.lines()
    assert lines[:2] == first and [x["n_train"] for x in lines[1:]] == [4, 7]
    written = curve.csv.read_bytes()
    rc.rebuild_from_evidence(curve.csv, SETTINGS)
    assert curve.csv.read_bytes() == written


def test_a_size_the_csv_lost_is_rerun_and_its_line_replaced(curve):
    """Killed between the evidence line and the CSV row: the rerun trains n again and its
    new line replaces the old one (never two lines for one n)."""
    curve.run([4, 7])
    text = curve.csv.read_text()
    curve.csv.write_text("".join(text.splitlines(keepends=True)[:2]))  # header and n=4
    curve.run([4, 7])
    assert curve.trained[-1] == (7, 5, 4) and len(curve.trained) == 3
    assert [x["n_train"] for x in curve.lines()[1:]] == [4, 7]


def test_an_old_csv_without_evidence_warns(curve, caplog):
    curve.run([4])
    curve.evidence.unlink()
    with caplog.at_level(logging.WARNING, logger="reranker_curve"):
        curve.run([4, 7])
    assert "n=4 in the CSV have no line in" in caplog.text
    assert [x["n_train"] for x in curve.lines()[1:]] == [7]


def test_the_committed_curve_is_rebuilt_from_its_committed_evidence(tmp_path):
    """results/ralm/reranker_curve.csv and .md from results/ralm/reranker_curve_heldout.jsonl.gz
    alone (a fresh clone has no label cache and no trained reranker), byte for byte."""
    from ragrepro.paths import REPO_ROOT

    committed = REPO_ROOT / "results" / "ralm"
    out = tmp_path / "reranker_curve.csv"
    shutil.copy(committed / "reranker_curve_heldout.jsonl.gz", rc.evidence_path(out))
    rc.main(["--from-evidence", "--out", str(out)])
    assert out.read_bytes() == (committed / "reranker_curve.csv").read_bytes()
    assert out.with_suffix(".md").read_bytes() == (committed / "reranker_curve.md").read_bytes()
