"""Can the predictive reranker's training code learn at all? (issue 22, item 10)

The mini learning curve (results/ralm/reranker_curve.md) sits at chance up to 1,000 examples.
Before that is read as a property of the labels, the same `ralm.predictive.train` on the
embedded MiniLM cross-encoder must (a) fit a small training set whose best documents are
arbitrary (memorisation: nothing but the training code can make it fit) and (b) learn a
signal whose best document is known by construction (the document naming the prefix's
subject) and carry it to held-out examples. Chance is 1/k = 0.25 for both.
"""
import numpy as np
import pytest

from ralm import predictive as pr

pytestmark = pytest.mark.slow

K = 4
WORDS = ["apple", "river", "castle", "violin", "tiger", "glacier", "pepper", "rocket", "saddle",
         "lantern", "coral", "falcon", "marble", "orchid", "canyon", "harbor", "meadow", "comet",
         "ember", "quartz"]


def _labels(best: int) -> tuple[float, ...]:
    # the best document's next stride is 6 nats likelier than every other one's
    return tuple(-3.0 if j == best else -9.0 for j in range(K))


def arbitrary_examples(n: int, rng: np.random.Generator) -> list[pr.Example]:
    """Bags of words with a best document drawn at random: learnable only by memorising."""
    out = []
    for _ in range(n):
        prefix = " ".join(rng.choice(WORDS, 3, replace=False))
        docs = tuple(" ".join(rng.choice(WORDS, 5, replace=False)) for _ in range(K))
        out.append(pr.Example(prefix, docs, tuple(map(str, range(K))),
                              _labels(int(rng.integers(K)))))
    return out


def subject_examples(n: int, rng: np.random.Generator) -> list[pr.Example]:
    """The best document is the one about the prefix's subject."""
    out = []
    for _ in range(n):
        subjects = rng.choice(WORDS, K, replace=False)
        best = int(rng.integers(K))
        prefix = f"The story now turns to the {subjects[best]} and what became of it"
        docs = tuple(f"A passage about the {s}: it is described here." for s in subjects)
        out.append(pr.Example(prefix, docs, tuple(subjects), _labels(best)))
    return out


def _train(examples, steps, lr):
    model = pr.Reranker("embedded:minilm", "cross", "mean", 64)
    losses = pr.train(model, examples, steps=steps, batch_size=8, lr=lr, weight_decay=0.01,
                      warmup_ratio=0.1, loss="eq9", temperature=1.0, seed=0)
    return model, losses


def test_fits_its_own_training_set_far_above_chance():
    train = arbitrary_examples(8, np.random.default_rng(1))
    model, losses = _train(train, steps=24, lr=3e-4)
    fit = pr.evaluate(model, train, "eq9", 1.0)
    assert fit["top1_agreement"] >= 7 / 8, fit
    # Eq. 9's floor is -max loglik = 3.0 nats (all rank mass on the best document); uniform
    # ranking gives -log((e^-3 + 3 e^-9) / 4) = 3 + log 4 - log(1 + 3 e^-6) = 4.38 nats
    assert fit["loss"] < 3.5 and losses[-1] < losses[0]


def test_learns_a_constructed_signal_and_generalises():
    rng = np.random.default_rng(0)
    train, held = subject_examples(32, rng), subject_examples(24, rng)
    model, _ = _train(train, steps=24, lr=1e-4)
    assert pr.evaluate(model, held, "eq9", 1.0)["top1_agreement"] >= 0.8
