"""Device and kernels in the row (issue 24, item 3): `attn_implementation` is a model setting
passed to from_pretrained and recorded resolved; eager and sdpa give the same NLL on CPU; the
run ids of existing results do not change with the new keys."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ragrepro import lock
from ragrepro.errors import ConfigError
from ragrepro.models.loading import check_attn_implementation
from ragrepro.paths import CONF_DIR
from ragrepro.tracking import run_id_of

# Run ids computed by the code before attn_implementation, lock_file and allow_unlocked
# existed (commit 892481e): the finished runs behind results/ralm/table1.md keep their ids.
IDS_BEFORE = {
    ("experiment=ralm/table1",): "819253efa5a3",
    ("experiment=ralm/table1", "model=gemma3-270m", "ralm/rerank=zeroshot"): "17f34de899e8",
    ("experiment=ralm/table1", "ralm/rerank=oracle"): "e0c2df25ca4f",
}

TEXT = ("The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, "
        "France. It is named after the engineer Gustave Eiffel, whose company designed and "
        "built the tower from 1887 to 1889.")
# Two kernels computing the same softmax attention in float32 differ only by summation
# order: ~1e-5 nats per token measured (8e-6 max, 7e-7 on the 155-token sum).
TOKEN_TOL = 1e-4
TOTAL_REL_TOL = 1e-6


def _run_id(*overrides: str) -> str:
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=list(overrides))
    return run_id_of(OmegaConf.to_container(cfg, resolve=True))


def test_existing_run_ids_are_unchanged():
    for overrides, expected in IDS_BEFORE.items():
        assert _run_id(*overrides) == expected, overrides


def test_new_keys_enter_the_id_only_when_they_change_numbers():
    base = _run_id("experiment=ralm/table1")
    assert _run_id("experiment=ralm/table1", "lock_file=null", "allow_unlocked=true") == base
    assert _run_id("experiment=ralm/table1", "attn_implementation=null") == base
    eager = _run_id("experiment=ralm/table1", "attn_implementation=eager")
    sdpa = _run_id("experiment=ralm/table1", "attn_implementation=sdpa")
    assert len({base, eager, sdpa}) == 3
    assert _run_id("experiment=ralm/table1", "model.attn_implementation=eager") != base
    # `device` is hashed as configured: auto is not resolved into the id (docs/running.md)
    assert _run_id("experiment=ralm/table1", "device=cpu") != base


def test_attn_implementation_values():
    assert check_attn_implementation(None) is None
    assert check_attn_implementation("sdpa") == "sdpa"
    with pytest.raises(ConfigError, match="attn_implementation='flash'.*eager"):
        check_attn_implementation("flash")


def test_model_configs_pass_the_root_kernel():
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for model in ("smollm2-135m", "gpt2", "llama-7b", "flan-t5-xl"):
            cfg = compose("config", overrides=[f"model={model}", "attn_implementation=eager"])
            assert cfg.model.attn_implementation == "eager", model


def _score(attn: str | None):
    from ragrepro.models import load_lm

    with lock.active(None, allow=False):
        lm = load_lm("smollm2-135m", "embedded:smollm2", dtype="float32", device="cpu",
                     revision="q4_1-gguf-0.1.2", attn_implementation=attn)
        ids = lm.encode(TEXT)
        # a right-padded batch: the short row checks each kernel's attention mask
        logps = lm.score_targets([ids, ids[:20]], [1, 1], batch_size=2)
        (record,) = lock.loaded().values()
    return logps, record


@pytest.mark.slow
def test_eager_and_sdpa_give_the_same_nll_on_cpu():
    eager, eager_rec = _score("eager")
    sdpa, sdpa_rec = _score("sdpa")
    default, default_rec = _score(None)
    assert (eager_rec["attn_implementation"], sdpa_rec["attn_implementation"]) == ("eager", "sdpa")
    assert eager_rec["device"] == sdpa_rec["device"] == "cpu"
    assert eager_rec["resolved"].startswith("sha256:")
    assert default_rec["attn_implementation"] in ("sdpa", "eager")  # what transformers picked
    for a, b in zip(eager, sdpa):
        assert np.max(np.abs(a - b)) < TOKEN_TOL
        assert abs(a.sum() - b.sum()) < TOTAL_REL_TOL * abs(a.sum())
    assert len(eager[0]) > 30 and -eager[0].sum() > 10  # a real text, not an empty score
    picked = eager if default_rec["attn_implementation"] == "eager" else sdpa
    assert all(np.array_equal(a, b) for a, b in zip(default, picked))
    if importlib.util.find_spec("flash_attn") is None:  # a clear refusal, not a traceback
        with pytest.raises(ConfigError, match="flash-attn package"):
            _score("flash_attention_2")
