"""What rehearsal=cpu changes (locations only), the sweep cells `make rehearse` runs, its
summary, and the paper-config bugs the rehearsal found (issue 13), each with a test."""
import csv
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ragrepro.configcheck import check_config, group_options, option_file
from ragrepro.models.lm import effective_dtype
from ragrepro.paths import CONF_DIR
from ragrepro.rehearsal.cells import CellResult, sweep_cells, write_summary
from ragrepro.rehearsal.config import apply, location_overrides
from ragrepro.runner import base_settings, row_dtype


def _compose(*overrides, hydra_node=False):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=hydra_node)


def test_sweep_cells_are_the_basic_sweepers_product_in_order():
    assert sweep_cells({"model": "a,b", "k": "1, 2,3"}) == [
        ["model=a", "k=1"], ["model=a", "k=2"], ["model=a", "k=3"],
        ["model=b", "k=1"], ["model=b", "k=2"], ["model=b", "k=3"]]
    assert sweep_cells(None) == [[]]


def test_every_paper_config_composes_in_rehearsal_mode_with_a_small_limit():
    exps = [e for e in group_options("experiment") if e.split("/")[1:2] == ["paper"]]
    assert len(exps) == 23
    for exp in exps:
        cfg = _compose(f"experiment={exp}", "rehearsal=cpu")
        assert cfg.rehearsal.enabled and cfg.limit == 2 and cfg.scale == "paper"


def test_rehearsal_only_changes_locations_and_names(tmp_path):
    cfg = _compose("experiment=ralm/paper/fig4", "rehearsal=cpu", "model=opt-66b")
    before = OmegaConf.to_container(cfg, resolve=True)
    wiring = OmegaConf.to_container(cfg.pipeline, resolve=False)
    apply(cfg, tmp_path, tmp_path / "results")
    after = OmegaConf.to_container(cfg, resolve=True)
    # the pipeline node only interpolates other nodes (the core contract): its wiring stays,
    # its resolved copy follows the nodes checked below
    assert OmegaConf.to_container(cfg.pipeline, resolve=False) == wiring
    changed = {k for k in after if after[k] != before.get(k)} - {"pipeline"}
    assert changed <= {"corpus", "ralm", "model", "results_dir", "device"}
    assert after["model"]["name"] == "opt-66b (stand-in)"
    assert after["model"]["source"] == "facebook/opt-66b"  # resolved to the stand-in at load
    assert after["ralm"]["forbidden_titles"].endswith("wikitext103_forbidden_titles.txt")
    assert after["corpus"]["path"] == str(tmp_path / "dpr" / "psgs_w100.tsv")
    assert after["results_dir"] == str(tmp_path / "results" / "rehearsal")
    assert {k: v for k, v in after["ralm"].items() if k != "forbidden_titles"} == \
        {k: v for k, v in before["ralm"].items() if k != "forbidden_titles"}


def test_location_overrides_leave_given_files_alone(tmp_path):
    cfg = OmegaConf.create({"corpus": {"name": "wikipedia-dpr", "path": "/mine.tsv"},
                            "dataset": {"name": "realnews", "path": None},
                            "riches": {"key": {"source": "factoid-wiki", "paths": []}}})
    out = location_overrides(cfg, tmp_path)
    assert out == {"dataset.path": str(tmp_path / "pile" / "realnews.jsonl"),
                   "riches.key.paths": [str(tmp_path / "riches" / "factoid-wiki.jsonl")]}


def test_training_is_capped_like_limit():
    from ragrepro.rehearsal.config import training_caps

    cfg = _compose("experiment=ralm/paper/table1", "ralm/rerank=predictive")
    assert training_caps(cfg, 2, 32, 4) == {"reranker.steps": 2, "reranker.n_examples": 32,
                                            "reranker.examples_per_text": 32,
                                            "reranker.batch_size": 4}
    cfg = _compose("experiment=filco/paper/table5")
    assert training_caps(cfg, 2, 32) == {"filco.train.common.max_steps": 2}
    assert training_caps(_compose("experiment=ralm/paper/fig4"), 2, 32) == {}


def test_generation_is_capped():
    from ragrepro.rehearsal.config import generation_caps

    cfg = _compose("experiment=filco/paper/table5")
    assert generation_caps(cfg, 16) == {"filco.ctx_max_new_tokens": 16,
                                        "filco.gen_max_new_tokens": 16}
    cfg = _compose("experiment=ralm/paper/table4")
    assert generation_caps(cfg, 16) == {"qa.max_new_tokens": 10}  # already below the cap
    caps = generation_caps(_compose("experiment=riches/paper/main"), 16)
    assert caps["riches.max_new_tokens"] == 16 and caps["riches.iterative.max_new_tokens"] == 16
    # the configured budgets the cap replaced, for the pipelines' budget checks
    from ragrepro.rehearsal.config import uncapped

    cfg = _compose("experiment=riches/paper/main")
    keys = ("riches.max_new_tokens", "riches.reader_max_new_tokens",
            "riches.iterative.max_new_tokens")
    assert all(OmegaConf.select(cfg, k) > 16 for k in keys)  # so the cap replaced each one
    assert uncapped(cfg, caps) == {k: OmegaConf.select(cfg, k) for k in keys}


def test_a_retrieval_cell_that_never_retrieved_fails_the_rehearsal():
    from ragrepro.rehearsal.cells import coverage_problem

    def cfg(rerank):  # RALM's profile judges it (ralm/profile.py, `coverage`)
        if rerank is None:
            return OmegaConf.create({})
        return OmegaConf.create({"ralm": OmegaConf.load(option_file("ralm/rerank", rerank))})

    assert "never exercised" in coverage_problem(cfg("first"), {"n_windows_with_doc": 0})
    assert coverage_problem(cfg("first"), {"n_windows_with_doc": 3}) == ""
    assert coverage_problem(cfg("none"), {"n_windows_with_doc": 0}) == ""
    assert coverage_problem(cfg(None), {"em": 0.0}) == ""
    assert coverage_problem(cfg("first"), {"n_windows_with_doc": 0}, profiles=()) == ""


def test_summary_csv_and_md(tmp_path):
    rows = [CellResult("ralm/paper/fig4", "model=opt-125m", "ok", 1.25),
            CellResult("ralm/paper/fig4", "model=opt-66b", "failed", 0.5, "ConfigError: x")]
    write_summary(rows, tmp_path, 2.0)
    with open(tmp_path / "summary.csv") as f:
        got = list(csv.DictReader(f))
    assert [r["status"] for r in got] == ["ok", "failed"] and got[1]["error"] == "ConfigError: x"
    assert got[0]["seconds"] == "1.2" or got[0]["seconds"] == "1.3"
    md = (tmp_path / "summary.md").read_text()
    assert "1 of 2 cells ok, 1 failed" in md and "ConfigError: x" in md


# ---- bugs found by reading and rehearsing the paper configs -----------------------------
@pytest.mark.parametrize("exp,cell", [("ralm/paper/fig9", "model=gpt2"),
                                      ("ralm/paper/fig10", "retriever=spider"),
                                      ("ralm/paper/fig3", "retriever=contriever")])
def test_dense_retriever_cells_get_no_bm25_index(exp, cell):
    """ralm/paper.yaml set retriever.index for every retriever: dense cells failed with
    `Unknown dense retriever setting(s) ['index']`."""
    from ragrepro.retrieval.corpus import corpus_from_passages
    from ragrepro.retrieval.dense import DenseRetriever

    cfg = _compose(f"experiment={exp}", cell)
    assert cfg.retriever._target_.endswith("DenseRetriever") and "index" not in cfg.retriever
    kw = {k: v for k, v in OmegaConf.to_container(cfg.retriever).items() if k != "_target_"}
    DenseRetriever(corpus_from_passages("c", []), **kw)  # rejects unknown settings


def test_bm25_paper_cells_still_use_the_prebuilt_wikipedia_dpr_index():
    for exp in ("ralm/paper/fig4", "ralm/paper/table1", "ralm/paper/fig3"):
        cfg = _compose(f"experiment={exp}")
        assert cfg.retriever.index == "wikipedia-dpr"


@pytest.mark.parametrize("model,dtype", [("opt-66b", "float16"), ("opt-125m", "float16"),
                                         ("gpt2", "float32"), ("gpt-j-6b", "float32")])
def test_paper_ralm_loads_the_checkpoint_dtype_and_rows_record_it(model, dtype):
    """Paper RALM runs defaulted to float32 (OPT-66B ~264 GB); the official code loads the
    checkpoint's torch_dtype (float16 for OPT and LLaMA)."""
    cfg = _compose("experiment=ralm/paper/fig4", f"model={model}")
    check_config(cfg)
    assert cfg.dtype == "checkpoint"
    assert effective_dtype(cfg.model.dtype, cfg.model.checkpoint_dtype) == dtype
    assert row_dtype(cfg) == dtype and base_settings(cfg)["dtype"] == dtype


def test_paper_llama_spreads_over_gpus_in_half_precision():
    cfg = _compose("experiment=ralm/paper/table2", "model=llama-33b")
    assert row_dtype(cfg) == "float16" and cfg.model.device_map == "auto"


def test_effective_dtype_needs_the_checkpoint_dtype():
    from ragrepro.errors import ConfigError

    assert effective_dtype("bfloat16", "float16") == "bfloat16"
    with pytest.raises(ConfigError, match="checkpoint_dtype"):
        effective_dtype("checkpoint", None)


def test_filco_paper_hotpotqa_retrieves_instead_of_taking_distractors():
    """passages=auto took HotpotQA's distractor paragraphs (they contain the gold ones);
    the paper retrieved with DPR over Wikipedia for every dataset."""
    from filco.data import retrieve
    from ragrepro.data.records import Passage, QARecord

    cfg = _compose("experiment=filco/paper/table2", "dataset=hotpotqa")
    assert cfg.filco.passages == "retriever"
    gold = Passage(pid="g", title="Gold", text="gold paragraph")
    rec = QARecord(qid="1", question="q?", answers=["a"], passages=[gold])

    class Fake:
        def search(self, queries, k):
            return [[Passage(pid="r", title="Retrieved", text="t")] for _ in queries]

    assert retrieve([rec], Fake(), 1, cfg.filco.passages)[0][0].title == "Retrieved"


def test_rehearsal_rows_go_to_their_own_folder(tmp_path):
    cfg = _compose("experiment=ralm/paper/table4", "rehearsal=cpu")
    apply(cfg, tmp_path, Path("/r"))
    assert cfg.results_dir == "/r/rehearsal" and cfg.model.name == "llama-7b (stand-in)"


def test_tables_built_from_rehearsal_rows_say_so(tmp_path):
    from ragrepro.report.tables import build_all

    (tmp_path / "results").mkdir()
    built = build_all(tmp_path / "results", names=["ralm/table1"], title_prefix="REHEARSAL: ")
    assert built and all(b.title.startswith("REHEARSAL: ") for b in built)
    assert (tmp_path / "results" / "report" / "ralm" / "table1.md").read_text().startswith(
        "# REHEARSAL: ")
