"""`ragrepro plan`: sizes from the architecture (no weights), GPUs needed, refusal."""
import pytest
from hydra import compose, initialize_config_dir

from ragrepro import plan
from ragrepro.errors import ConfigError
from ragrepro.models.archs import count_parameters
from ragrepro.paths import CONF_DIR


def _cfg(*overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize("source,arch,billions", [
    ("gpt2", "GPT2LMHeadModel", 0.124),              # published sizes of the checkpoints
    ("facebook/opt-66b", "OPTForCausalLM", 65.7),
    ("huggyllama/llama-30b", "LlamaForCausalLM", 32.5),
    ("EleutherAI/gpt-j-6b", "GPTJForCausalLM", 6.05)])
def test_parameter_counts_from_the_architecture(source, arch, billions):
    assert count_parameters(source, arch) / 1e9 == pytest.approx(billions, rel=0.01)


def test_activation_estimate_by_hand():
    # 1 x (2*2*8*4*2 + 4*8*4*2 + 8*10*4) bytes = 256 + 256 + 320 = 832 bytes
    assert plan.activation_gb(1, 8, 4, 2, 10, "float16") * plan.GB == pytest.approx(832)


def test_gpus_needed_and_fits():
    m = plan.ModelPlan("lm", "x", 40 * 2**30, "float16", 1, 1, 1)  # 80 GB of weights
    p = plan.CellPlan("c", [m], act_gb=2.0, gpu_gb=80.0, gpus=1, disk_gb=0.0)
    assert p.total_gb == pytest.approx(82.0)
    assert p.gpus_needed == 2 and p.fits is False  # 82 GB > 0.9 x 80 GB
    p.gpus = 2
    assert p.fits is True
    assert plan.CellPlan("c", [m], 0.0, None, 0, 0.0).fits is None


def test_lm_forward_tokens_are_windows_times_length():
    cfg = _cfg("experiment=ralm/paper/fig4")
    tokens = int(245_569 * plan.TOKENS_PER_WORD)
    assert plan.forward_tokens(cfg) == -(-tokens // 4) * 1024


def test_qa_forward_tokens_follow_the_limit():
    cfg = _cfg("experiment=ralm/paper/table4", "limit=10")
    assert plan.forward_tokens(cfg) == 10 * (2 * 160 + 64 + 10)


def test_plan_table_for_fig4_on_two_80gb_gpus():
    text = plan.plan_text(["experiment=ralm/paper/fig4"], True, gpu_mem=80, gpus=2)
    rows = [r for r in text.splitlines() if r.startswith("| model=")]
    assert len(rows) == 16
    big = next(r for r in rows if "opt-66b" in r)
    assert "(65.72B, float16)" in big and "| 2 of 2 | yes |" in big
    assert "forbidden titles auto (MISSING)" in text


def test_a_cell_that_cannot_fit_is_refused_with_the_table(monkeypatch):
    monkeypatch.setattr(plan, "detect_gpus", lambda: (24.0, 1))
    with pytest.raises(ConfigError, match="needs about 125 GB") as e:
        plan.check_fits(_cfg("experiment=ralm/paper/fig4", "model=opt-66b"))
    assert "| GPUs needed |" in str(e.value)


def test_several_gpus_need_device_map(monkeypatch):
    monkeypatch.setattr(plan, "detect_gpus", lambda: (40.0, 4))
    with pytest.raises(ConfigError, match="device_map=auto"):
        plan.check_fits(_cfg("experiment=ralm/paper/fig4", "model=opt-30b",
                             "model.device_map=null"))
    plan.check_fits(_cfg("experiment=ralm/paper/fig4", "model=opt-30b"))  # auto: allowed


def test_mini_models_are_not_sized(monkeypatch):
    monkeypatch.setattr(plan, "detect_gpus", lambda: (0.001, 1))
    plan.check_fits(_cfg("experiment=ralm/table1"))  # embedded model: nothing to refuse
