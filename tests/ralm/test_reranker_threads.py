"""The predictive reranker trains at a fixed torch thread count, whatever the process runs at."""
from types import SimpleNamespace

import torch

from ralm import reranker


def test_training_runs_at_train_threads_and_restores_the_process_count(monkeypatch):
    seen = {}

    def fake_train(model, examples, *args):
        seen["threads"] = torch.get_num_threads()
        return [1.0, 0.5]

    ex = [SimpleNamespace(i=i) for i in range(10)]
    monkeypatch.setattr(reranker, "training_examples", lambda t, dkey: (ex, "data.json"))
    monkeypatch.setattr(reranker.pr, "Reranker", lambda *a: "model")
    monkeypatch.setattr(reranker.pr, "evaluate", lambda *a: {"loss": 1.0})
    monkeypatch.setattr(reranker.pr, "train", fake_train)
    monkeypatch.setattr(reranker.pr, "save", lambda *a: None)
    monkeypatch.setattr(reranker.pr, "model_dir", lambda key: "folder")
    rc = SimpleNamespace(heldout_fraction=0.1, encoder={"source": "embedded:minilm"},
                         arch="cross", max_length=96, loss="eq9", temperature=1.0, steps=2,
                         batch_size=8, lr=1e-5, weight_decay=0.0, warmup_ratio=0.1, seed=0)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        _model, report = reranker.train_reranker(SimpleNamespace(rc=rc), {}, {})
        assert seen["threads"] == reranker.TRAIN_THREADS == 2
        assert torch.get_num_threads() == 1  # the process's own count again afterwards
        assert (report["n_train"], report["n_heldout"]) == (9, 1)
    finally:
        torch.set_num_threads(before)


def test_the_thread_count_is_in_the_models_cache_key(monkeypatch):
    rc = SimpleNamespace(encoder={"name": "minilm", "source": "s", "revision": None,
                                  "pooling": "mean"},
                         **{k: 1 for k in reranker.TRAIN_KEYS})
    monkeypatch.setattr(reranker, "data_key", lambda t, label: {"d": 1})
    mkey, _ = reranker.model_key(SimpleNamespace(rc=rc, label_model=SimpleNamespace(config={})))
    assert mkey["train_threads"] == reranker.TRAIN_THREADS
