"""The predictive reranker's learning curve (scripts/reranker_curve.py): the evaluated articles
never reach the training texts, the agreement numbers on hand-computed cases, the zero-shot
tap leaves the harness's labels unchanged, and a bigger n resumes from the smaller n's labels
and rows."""
import json

import numpy as np
import pytest

from scripts import reranker_curve as rc


def test_train_pool_drops_forbidden_titles_and_is_a_seeded_permutation():
    titles = ["A", "Evaluated", "B", "C", "Evaluated 2"]
    pool = rc.train_pool(titles, ["Evaluated", "Evaluated 2"], seed=3)
    assert sorted(pool) == [0, 2, 3]
    assert pool == rc.train_pool(titles, ["Evaluated", "Evaluated 2"], seed=3)
    assert [titles[i] for i in rc.train_pool(titles, [], seed=3) if i in pool] == \
        [titles[i] for i in pool]  # the same order with and without the filter


def test_wiki_vital_training_texts_never_hold_an_evaluated_article():
    """Table 1 evaluates the first 10 held-out test articles; neither the curve's pool nor
    the harness's own corpus training texts (ralm.reranker.training_texts, every corpus
    lead drawn) may contain one, nor any other held-out title."""
    from dataclasses import replace

    from ragrepro.data.vital import heldout_titles, lm_docs
    from ralm.reranker import training_texts

    cfg = rc.compose_cfg([])
    evaluated = {d.title for d in lm_docs("test")[: int(cfg.limit)]}
    held = set(heldout_titles())
    assert len(evaluated) == 10 and evaluated <= held
    pool = rc.corpus_texts(cfg)
    assert len(pool) > 9000
    assert not {d.title for d in pool} & held
    t = rc.training_inputs(cfg)
    harness = training_texts(replace(t, rc=replace(t.rc, train_texts=100000)))
    assert len(harness) == len(pool)
    assert not {d.title for d in harness} & held
    # the filter itself works when a corpus does hold an evaluated article
    titles = [d.title for d in pool[:50]] + sorted(evaluated)
    kept = rc.train_pool(titles, sorted(held), seed=0)
    assert len(kept) == 50 and all(titles[i] not in evaluated for i in kept)


def test_top1_and_first_agreement_hand_computed():
    loglik = np.array([[-10.0, -12.0, -9.0, -30.0],    # LM best: doc 2
                       [-5.0, -6.0, -7.0, -8.0],       # doc 0
                       [-3.0, -1.0, -1.0, -9.0]])      # doc 1 (first of a tie)
    scores = np.array([[0.1, 0.2, 0.9, 0.0],           # picks 2: agrees
                       [0.0, 1.0, 0.0, 0.0],           # picks 1: disagrees
                       [0.0, 0.5, 0.5, 0.0]])          # picks 1 (first of a tie): agrees
    assert rc.top1_agreement(scores, loglik).tolist() == [1.0, 0.0, 1.0]
    assert rc.first_agreement(loglik).tolist() == [0.0, 1.0, 0.0]


def test_summarise_hand_computed():
    held = [{"loglik": [-1.0, -2.0], "zeroshot": [-5.0, -4.0]},   # LM best 0; zero-shot 1
            {"loglik": [-3.0, -2.0], "zeroshot": [-4.0, -3.0]},   # LM best 1; zero-shot 1
            {"loglik": [-1.0, -3.0], "zeroshot": [-1.0, -2.0]},   # LM best 0; zero-shot 0
            {"loglik": [-2.0, -1.0], "zeroshot": [-1.0, -2.0]}]   # LM best 1; zero-shot 0
    trained = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])  # all agree
    untrained = np.zeros((4, 2))                                          # always doc 0
    row = rc.summarise(held, trained, untrained, np.array([1.0, 2.0, 3.0, 4.0]),
                       np.zeros(4))
    assert row["agree_trained"] == 1.0 and row["agree_zeroshot"] == 0.5
    assert row["agree_untrained"] == 0.5 and row["agree_first"] == 0.5
    assert row["chance"] == 0.5 and row["k"] == 2 and row["n_heldout"] == 4
    assert row["loss_trained"] == pytest.approx(2.5)
    assert row["trained_minus_zeroshot"] == pytest.approx(0.5)
    assert row["agree_trained_lo"] == row["agree_trained_hi"] == 1.0
    assert row["agree_zeroshot_lo"] < 0.5 < row["agree_zeroshot_hi"]


class FakeLM:
    def score_targets(self, inputs, target_starts, batch_size=8):
        return [-np.arange(s, len(r), dtype=float) for r, s in zip(inputs, target_starts)]


def test_zero_shot_tap_splits_the_widened_pass():
    tap = rc.ZeroShotTap(FakeLM(), lead=3)
    rows = [list(range(10)), list(range(6))]
    out = tap.score_targets(rows, [8, 2])
    plain = FakeLM().score_targets(rows, [8, 2])
    assert [o.tolist() for o in out] == [p.tolist() for p in plain]
    # row 0: tokens 5, 6, 7 precede the target; row 1: only token 1 has a token before it
    assert tap.zeroshot == [-(5 + 6 + 7), -1.0]


def test_curve_labels_incrementally_and_resumes(tmp_path):
    cache, out = tmp_path / "labels.jsonl", tmp_path / "curve.csv"
    labelled, trained = [], []

    def label(i):
        labelled.append(i)
        return [{"i": i, "j": j, "loglik": [-1.0, -2.0], "zeroshot": [0.0, 1.0]}
                for j in range(3)]  # 3 examples per chunk

    def train_eval(rows, held, steps):
        trained.append((len(rows), len(held), steps))
        n = len(held)
        return rc.HeldoutScores(np.ones((n, 2)), np.zeros((n, 2)), np.ones(n), np.ones(n))

    args = {"heldout_chunks": 1, "max_chunks": 100, "label_chunk": label,
            "train_eval": train_eval, "epochs": 2.0, "batch_size": 4, "machine": "CPU X"}
    rc.run_curve([4], cache, out, **args)
    assert labelled == [0, 1, 2] and trained == [(4, 3, 2)]
    (line,) = rc.read_evidence(rc.evidence_path(out))
    assert line["machine"] == "CPU X" and line["n_train"] == 4  # where it ran, kept
    rc.run_curve([4, 7], cache, out, **args)
    assert labelled == [0, 1, 2, 3] and trained == [(4, 3, 2), (7, 3, 4)]
    assert rc.done_sizes(out) == {4, 7}
    # a run killed while appending a chunk: the torn line is dropped and relabelled
    with cache.open("a") as f:
        f.write('{"chunk": 4, "exa')
    rc.run_curve([4, 7, 12], cache, out, **args)
    assert labelled == [0, 1, 2, 3, 4] and trained[-1] == (12, 3, 6)
    assert [json.loads(x)["chunk"] for x in cache.read_text().splitlines()] == [0, 1, 2, 3, 4]


@pytest.mark.slow
def test_tap_leaves_the_harness_labels_unchanged(smollm):
    """make_examples through the tap gives the same examples and labels as without it, and
    the zero-shot score is the official Eq. 6 sum over the last s' prefix tokens."""
    from ralm.reranker import make_examples

    cfg = rc.compose_cfg(["ralm.max_length=64", "ralm.stride=16", "ralm.doc_max_tokens=24",
                          "ralm.k=2", "ralm.rerank_tokens=4", "reranker.examples_per_text=1"])
    texts = rc.corpus_texts(cfg)[:2]
    t = rc.training_inputs(cfg, smollm)
    plain = make_examples(t, smollm, texts)
    tap = rc.ZeroShotTap(smollm, lead=4)
    tapped = make_examples(t, tap, texts)
    assert len(plain) == 2 and len(tap.zeroshot) == 4
    for a, b in zip(plain, tapped):
        assert a.prefix == b.prefix and a.docs == b.docs
        assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
    assert all(z < 0 for z in tap.zeroshot)


def test_label_margins_hand_computed():
    from scripts.reranker_curve_report import label_margins, margin_note

    held = [{"loglik": [-10.0, -12.0, -9.0, -30.0]},   # best -9, second -10: 1.0
            {"loglik": [-5.0, -5.2, -7.0, -8.0]},      # 0.2
            {"loglik": [-3.0, -1.0, -1.0, -9.0]}]      # a tie: 0.0
    assert label_margins(held).tolist() == pytest.approx([1.0, 0.2, 0.0])
    assert "median 0.20; 67% below 0.5 nats, 67% below 1 nat" in margin_note(held)
