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
    # the engine's windows: one of 1,024 tokens, then one every 4 (ralm/windows.py)
    windows = 1 + -(-(tokens - 1024) // 4)
    assert plan.forward_tokens(cfg) == windows * 1024
    # vocabulary logits at the scored tokens only: each token but the first, once
    assert plan.method_extras(cfg).sizing.scored_tokens == tokens - 1


def test_qa_forward_tokens_follow_the_limit():
    cfg = _cfg("experiment=ralm/paper/table4", "limit=10")
    assert plan.forward_tokens(cfg) == 10 * (2 * 160 + 64 + 10)


def test_filco_sizes_its_cells_through_its_profile():
    from filco.profile import PROFILE
    from ragrepro.methods import Sizing

    cfg = _cfg("experiment=filco/paper/table5", "limit=10")
    # k=5 passages, 128 answer tokens, 1,024-token inputs, batch_size 8 (its paper config)
    assert PROFILE.planner.plan(cfg, plan.TFLOPS).sizing == Sizing(10 * (5 * 160 + 64 + 128), 1024, 8)
    assert plan.forward_tokens(cfg) == 10 * (5 * 160 + 64 + 128)
    # without its profile the core knows none of FilCo's keys: one passage, 32 tokens
    assert plan.method_extras(cfg, profiles=()).sizing is None
    assert plan.generic_sizing(cfg) == Sizing(10 * (160 + 64 + 32), 2048, 8)


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


# ---- indexes -------------------------------------------------------------------------------
DPR_N = 21_015_324


def _index(cfg, prefix):
    return next(i for i in plan.plan_cell(cfg, "", 80.0, 1).indexes if i.what.startswith(prefix))


def test_size_and_time_formulas_by_hand():
    # 2 x 1e8 params x 100 tokens x 1000 passages = 2e13 FLOPs at 1 TFLOP/s = 20 s
    assert plan.encode_hours(1_000, 100, 10**8, 1.0) == pytest.approx(20 / 3600)
    assert plan.lucene_gb(plan.GB / 10) == pytest.approx(1.0)  # 10 bytes a word


def test_dense_index_sizes_flat_ivfpq_hnsw_for_dpr():
    cfg = _cfg("experiment=ralm/paper/fig9")  # dense-bert-base over wikipedia-dpr
    flat = _index(cfg, "dense FAISS flat")
    assert flat.chosen and flat.ram_gb == pytest.approx(DPR_N * 768 * 4 / plan.GB)
    ivf = _index(cfg, "dense FAISS ivfpq")
    # auto: nlist = 4 sqrt(N) = 18337, m = 768 / 8 = 96 bytes + an 8-byte id per vector
    assert "nlist=18337,m=96,nbits=8" in ivf.what and not ivf.chosen
    assert ivf.ram_gb * plan.GB == pytest.approx(DPR_N * 104 + 4 * 768 * (18_337 + 256))
    hnsw = _index(cfg, "dense FAISS hnsw")
    assert hnsw.ram_gb * plan.GB == pytest.approx(DPR_N * (4 * 768 + 4 * (64 + 32 / 31) + 12))


def test_the_auto_default_shows_the_re_ranking_ram_and_its_memory_mapped_store():
    cfg = _cfg("experiment=ralm/paper/fig9")  # chooses flat; auto shown beside it
    auto = _index(cfg, "dense FAISS ivfpq(nlist=18337,m=96,nbits=8,nprobe=4585,train_size="
                       "1173568,refine=8)")
    assert not auto.chosen and "the type=auto default" in auto.note
    # RAM and disk: the PQ codes and ids only; the 60.1 GB of float vectors it re-scores are
    # the embedding files, memory-mapped
    assert auto.ram_gb * plan.GB == pytest.approx(DPR_N * 104 + 4 * 768 * (18_337 + 256))
    assert auto.disk_gb == auto.ram_gb and "from the 60.1 GB of embeddings, memory-mapped" in \
        auto.note
    chosen = plan.plan_cell(_cfg("experiment=ralm/paper/fig9", "retriever.faiss.type=auto"),
                            "", 80.0, 1)
    [mine] = [i for i in chosen.indexes if i.chosen and "FAISS" in i.what]
    assert mine.what == auto.what and mine.note.endswith("chosen")
    # shown once: auto is not repeated among the alternatives
    assert sum("refine=8" in i.what for i in chosen.indexes) == 1


def test_the_chosen_index_type_counts_in_the_cell_disk():
    flat = plan.plan_cell(_cfg("experiment=ralm/paper/fig9"), "", 80.0, 1)
    ivf = plan.plan_cell(_cfg("experiment=ralm/paper/fig9", "retriever.faiss.type=ivfpq",
                              "retriever.faiss.nlist=4096"), "", 80.0, 1)
    chosen = next(i for i in ivf.indexes if i.chosen and "FAISS" in i.what)
    assert "nlist=4096" in chosen.what
    assert ivf.disk_gb - flat.disk_gb == pytest.approx(chosen.disk_gb)  # flat: rebuilt in RAM


def test_bm25_prebuilt_and_local_lucene_sizes():
    pre = _index(_cfg("experiment=ralm/paper/fig4"), "BM25 pyserini prebuilt")
    assert pre.disk_gb * plan.GB == pytest.approx(9_177_942_656)
    local = _index(_cfg("experiment=ralm/paper/fig4", "retriever=bm25"), "BM25 Lucene")
    assert local.disk_gb * plan.GB == pytest.approx(DPR_N * 102.0 * plan.LUCENE_BYTES_PER_WORD)


def test_riches_index_comes_through_its_hook_and_the_core_imports_no_method():
    import ast
    import inspect

    from ragrepro.methods import profiles_of

    cfg = _cfg("experiment=riches/paper/main", "riches/method=riches")
    assert [p.name for p in profiles_of(cfg)] == ["riches"]
    assert [p.name for p in profiles_of(_cfg("experiment=ralm/paper/fig4"))] == ["ralm"]
    assert profiles_of(_cfg("experiment=core/smoke")) == []  # the core's own pipeline
    # without the RICHES profile the core knows no suffix array
    assert not [i for i in plan.method_extras(cfg, profiles=()).indexes if "RICHES" in i.what]
    sa = _index(cfg, "RICHES suffix array")
    assert "2 int32 suffix-array shard(s)" in sa.note and "256,885,003 keys" in sa.entries
    assert sa.disk_gb * plan.GB == pytest.approx(3_709_419_444 * 6 + 16 * 256_885_003)
    tree = ast.parse(inspect.getsource(plan))
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | \
        {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not {m.split(".")[0] for m in imported} & {"ralm", "riches", "filco"}


def test_index_table_is_rendered_once_per_index():
    text = plan.plan_text(["experiment=ralm/paper/fig3"], True, gpu_mem=80, gpus=1)
    rows = [r for r in text.splitlines() if r.startswith("| dense FAISS flat")]
    assert len(rows) == 1 and "12 of 16 cells" in rows[0]


def test_cells_that_never_search_the_retriever_need_no_retriever_index():
    riches = plan.plan_cell(_cfg("experiment=riches/paper/main", "riches/method=riches"), "",
                            80.0, 1)
    reader = plan.plan_cell(_cfg("experiment=riches/paper/main", "riches/method=dense_reader"),
                            "", 80.0, 1)
    assert not any("FAISS" in i.what for i in riches.indexes)
    assert any("FAISS flat" in i.what for i in reader.indexes)
    assert not any("RICHES" in i.what for i in reader.indexes)  # only RICHES decodes keys


def test_a_dense_index_the_corpus_cannot_train_is_refused_by_the_plan():
    cfg = _cfg("experiment=ralm/paper/fig9", "retriever.faiss.type=ivfpq",
               "retriever.faiss.nlist=1000000")
    with pytest.raises(ConfigError, match="nlist <= 538854"):  # 21,015,324 // 39
        plan.plan_cell(cfg, "", 80.0, 1)
