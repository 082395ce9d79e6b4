"""The planner's time model: decoding memory-bound (weights + KV cache per step over the
bandwidth, with batch and beam), prefill and scoring compute-bound; numbers by hand."""
import pytest
from hydra import compose, initialize_config_dir

from ragrepro import plan
from ragrepro.errors import ConfigError
from ragrepro.methods import Decoding
from ragrepro.models.archs import count_parameters
from ragrepro.paths import CONF_DIR

LLAMA2 = "meta-llama/Llama-2-7b-hf"


def _cfg(*overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_llama2_7b_fp16_step_on_an_a100_reads_its_weights_once():
    # 6,738,415,616 params x 2 bytes = 13.48e9 bytes; / 2.0e12 B/s = 6.74 ms a step
    params = count_parameters(LLAMA2, "LlamaForCausalLM")
    assert params == 6_738_415_616
    a100 = plan.Device("A100 at 2.0 TB/s", 100e12, 2.0e12, "test")
    step = plan.decode_step_seconds(params * 2, 0.0, params, 1, a100)
    assert step == pytest.approx(13_476_831_232 / 2.0e12)
    assert step == pytest.approx(6.74e-3, rel=1e-3)
    # a batch x beam of 10 shares the weight read: the same bytes, 10x the FLOPs (still
    # under the memory time: 2 x 6.74e9 x 10 / 1e14 = 1.35 ms)
    assert plan.decode_step_seconds(params * 2, 0.0, params, 10, a100) == pytest.approx(step)


def test_kv_bytes_per_token_by_hand():
    assert plan.kv_bytes_per_token(32, 4096, 2) == 2 * 32 * 4096 * 2 == 524_288
    assert plan.kv_dim_of(LLAMA2) == 4096  # 32 key/value heads x 128 (no GQA)


def test_a_wide_enough_step_is_compute_bound():
    dev = plan.Device("d", 1e14, 2e12, "test")
    # 2e9 bytes / 2e12 = 1 ms; 2 x 1e9 x 100 sequences / 1e14 = 2 ms: the FLOPs decide
    assert plan.decode_step_seconds(2e9, 0.0, 10**9, 100, dev) == pytest.approx(2e-3)
    assert plan.decode_step_seconds(2e9, 0.0, 10**9, 10, dev) == pytest.approx(1e-3)


def test_kv_cache_grows_with_the_position():
    dev = plan.Device("d", 1e30, 1e9, "test")  # compute free: memory alone
    # 2 sequences, context 10, 3 steps, 1,000 bytes a token: step t reads 1e9 + 2 x (10 + t)
    # x 1e3 bytes -> (3e9 + 2e3 x 33) / 1e9 = 3.000066 s
    got = plan.decode_batch_seconds(1e9, 1e3, 1, 2, 10, 3, 1, dev)
    assert got == pytest.approx(3.000066)
    # a beam that moves its cache 3 times a step reads it 3 times
    assert plan.decode_batch_seconds(1e9, 1e3, 1, 2, 10, 3, 3, dev) == pytest.approx(3.000198)


def test_batches_and_beam_of_a_cell():
    dev = plan.Device("d", 1e30, 1e9, "test")
    # 5 prompts, batch 2, beam 3: two batches of 6 sequences and one of 3; 1 step, context 0
    d = Decoding(sequences=5, steps=1, context=0, batch=2, beam=3)
    assert d.generated_tokens == 15
    assert plan.decode_seconds(d, 1e9, 1e3, 1, dev) == pytest.approx(3.0)  # 3 weight reads
    d2 = Decoding(sequences=5, steps=2, context=4, batch=2, beam=3)
    # per batch of n sequences: 2 x 1 s + n x (4 + 5) x 1e3 / 1e9
    want = 2 * (2 + 6 * 9e3 / 1e9) + (2 + 3 * 9e3 / 1e9)
    assert plan.decode_seconds(d2, 1e9, 1e3, 1, dev) == pytest.approx(want)


def test_compute_bound_prefill():
    # 2 x 1e9 params x 1e4 tokens / 1e14 FLOP/s = 0.2 s
    assert plan.compute_seconds(10**9, 1e4, 1e14) == pytest.approx(0.2)


def test_riches_paper_plan_is_memory_bound():
    """nq-open (3,610 questions), Llama-2-7B fp16, beam 10, 160 steps on an A100 80GB:
    about 1.6 h of decoding, where the compute-bound plan gave 0.03 h."""
    from riches.plan import prompt_tokens

    cfg = _cfg("experiment=riches/paper/main", "riches/method=riches", "dataset=nq-open")
    p = plan.plan_cell(cfg, "", 80.0, 1)
    prefix = prompt_tokens(cfg)
    assert prefix == int((198 + 3 * 21) * 1.3) == 339  # single-hop prompt: words + 3 keys
    ctx, steps, beam, n = prefix + 32, 160, 10, 3_610
    weights = 6_738_415_616 * 2
    kv = 524_288
    # per question: 160 weight reads + 3 passes x 10 hypotheses x sum_t (ctx + t) tokens
    per_q = (steps * weights + 3 * beam * kv * (steps * ctx + steps * (steps - 1) / 2)) / 2.039e12
    assert p.decode_s == pytest.approx(n * per_q)
    assert p.decode_s / 3600 == pytest.approx(1.618, abs=0.002)
    assert p.hours > 1.6 and p.decode_s / 3600 / p.hours > 0.99  # decoding is the bulk
    # what the old compute-bound model gave: 924,160 generic tokens at 100 TFLOP/s
    old = 3_610 * (160 + 64 + 32) / plan.tokens_per_second(6_738_415_616) / 3600
    # 924,160 x 2 x 6.74e9 / 1e14 = 124.6 s = 0.035 h (the "0.03 h")
    assert old == pytest.approx(0.0346, abs=1e-4) and p.hours / old > 45


def test_scoring_cells_stay_compute_bound():
    cfg = _cfg("experiment=ralm/paper/fig4", "model=opt-6.7b")
    p = plan.plan_cell(cfg, "", 80.0, 1)
    assert p.decode_s == 0.0 and p.generated_tokens == 0
    body, head = plan.lm_matmuls(p.models[0])
    assert body + head < p.models[0].params  # the token and position tables are lookups
    scored = int(245_569 * plan.TOKENS_PER_WORD) - 1
    flops = 2 * (body * p.forward_tokens + head * scored)
    assert p.hours == pytest.approx(flops / plan.DEVICES[plan.DEFAULT_DEVICE].flops / 3600)
    # a given rate is taken as it is, for every forward token
    given = plan.plan_cell(cfg, "", 80.0, 1, tok_per_s=1e4)
    assert given.hours == pytest.approx(given.forward_tokens / 1e4 / 3600)


def test_qa_and_filco_decode_greedily_in_batches():
    from filco.profile import PROFILE as FILCO
    from ralm.profile import PROFILE as RALM

    qa = _cfg("experiment=ralm/paper/table4", "limit=10")
    assert RALM.planner.plan(qa, plan.TFLOPS).decoding == Decoding(10, 10, 2 * 160 + 64, 1)
    psg = _cfg("experiment=filco/paper/table5", "limit=10", "filco/variant=psg")
    assert FILCO.planner.plan(psg, plan.TFLOPS).decoding == Decoding(10, 128, 5 * 160 + 64, 8)
    filtering = _cfg("experiment=filco/paper/table5", "limit=10", "filco/variant=filco")
    got = FILCO.planner.plan(filtering, plan.TFLOPS).decoding
    ctx_tokens = filtering.filco.ctx_max_new_tokens
    assert got.steps == 128 + ctx_tokens  # M_ctx's filtered context, then the answer


def test_devices_by_name_and_the_measured_cpu():
    assert plan.device_named("a100-80gb").bandwidth == 2.039e12
    with pytest.raises(ConfigError, match="Unknown device 'tpu'"):
        plan.device_named("tpu")
    rows = [{"kind": "matvec", "rate": "7.5", "threads": "1"},
            {"kind": "matmul", "rate": "60", "threads": "1"}]
    cpu = plan.cpu_device(rows)
    assert cpu.bandwidth == 7.5e9 and cpu.flops == pytest.approx(0.5 * 60e9)
    with pytest.raises(ConfigError, match="memory_bandwidth"):
        plan.cpu_device(rows[:1])


def test_plan_table_shows_the_decoding_hours():
    text = plan.plan_text(["experiment=riches/paper/main", "riches/method=riches",
                           "dataset=nq-open"], False, gpu_mem=80, gpus=1)
    row = next(r for r in text.splitlines() if r.startswith("| (default)"))
    assert row.endswith("| 1.62 (decoding 1.62) |")  # hours, of which memory-bound decoding
    assert "decoding memory-bound on NVIDIA A100 80GB SXM" in text
    assert "2,039 GB/s" in text


def test_host_peak_is_the_sum_of_its_parts():
    assert plan.host_peak_gb(0.5, 1.0, 0.25, 2.0) == pytest.approx(3.75)


def test_riches_ablation_and_baselines_decode_with_one_live_hypothesis():
    from riches.plan import decoding_of, prompt_tokens

    base = ("experiment=riches/paper/main", "dataset=nq-open")
    _, riches = decoding_of(_cfg(*base, "riches/method=riches"))
    _, free = decoding_of(_cfg(*base, "riches/method=no_retrieval"))
    cfg = _cfg(*base, "riches/method=iterative")
    _, iterative = decoding_of(cfg)
    assert (riches.beam, riches.steps, riches.kv_passes) == (10, 160, 3)
    # adaptive beam: without the constraint every hypothesis is free text, width 1
    assert (free.beam, free.steps) == (1, 160)
    # 4 follow-up steps of 64 tokens each, after the prompt, question and 4 passages
    assert iterative == Decoding(3_610, 4 * 64, prompt_tokens(cfg) + 32 + 4 * 160, 1, 1, 1)


def test_scoring_runs_the_head_at_the_scored_positions_only():
    # 100 positions through 1e6 layer parameters, a 4e5-parameter head at 10 of them
    assert plan.scoring_seconds(10**6, 4 * 10**5, 100, 10, 1e9) == pytest.approx(
        2 * (10**6 * 100 + 4 * 10**5 * 10) / 1e9)


def test_matmul_parameters_leave_the_embedding_tables_out():
    from ragrepro.models.archs import matmul_parameters

    # GPT-2 small: 124,439,808 parameters; token table 50,257 x 768 (tied to the head) and
    # position table 1,024 x 768 are looked up: 85,056,000 in the layers (its known
    # non-embedding count)
    assert matmul_parameters("gpt2", "GPT2LMHeadModel") == (85_056_000, 50_257 * 768)
    # OPT-350m: the head is its 512-wide tied table; project_in/out are matmuls
    body, head = matmul_parameters("facebook/opt-350m", "OPTForCausalLM")
    assert head == 50_272 * 512 and body == 331_198_464 - head - 2050 * 1024
