"""The `ralm.rerank` variants as classes and the one settings object of a run: what each
variant asks of the pipeline, the checks made when the settings are built, and the row's
reranking columns, which must read exactly as the committed Table 1 rows do."""
from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf
from ralm_testdata import run_settings

from ragrepro.errors import ConfigError
from ragrepro.paths import CONF_DIR
from ralm import rerank as rr
from ralm.settings import RunSettings

# The settings columns of the 12 Table 1 rows as the code before RunSettings wrote them (copied
# from results/ralm/table1.csv of the 2026-12-01 rerun; results/ is not committed).
TABLE1_CSV = Path(__file__).parent / "golden" / "table1_settings.csv"
ROW_KEYS = ("stride", "retrieval_stride", "query_len", "query_clean_spaces", "max_length",
            "doc_max_tokens", "k", "rerank", "rerank_tokens", "scorer_model", "word_count",
            "stream", "add_bos", "window_bos", "retrieval_file", "forbidden_titles", "corpus")


def test_every_variant_is_registered_under_its_own_name():
    assert rr.NAMES == ("none", "first", "random", "zeroshot", "oracle", "predictive", "gold")
    for name in rr.NAMES:
        assert rr.variant(name).name == name


@pytest.mark.parametrize("name,retrieves,searches,lm_ranked,trained,candidates", [
    ("none", False, False, False, False, 1),
    ("first", True, True, False, False, 1),
    ("random", True, True, False, False, 1),
    ("zeroshot", True, True, True, False, 4),
    ("oracle", True, True, True, False, 4),
    ("predictive", True, True, False, True, 1),
    ("gold", True, False, False, False, 1),
])
def test_what_each_variant_asks_of_the_pipeline(name, retrieves, searches, lm_ranked, trained,
                                                candidates):
    v = rr.variant(name)
    assert (v.retrieves, v.searches, v.lm_ranked, v.trained) == \
        (retrieves, searches, lm_ranked, trained)
    assert v.candidates(4) == candidates
    # only zero-shot ranks the last s' prefix tokens, so only it needs them in the window
    assert v.window_extra(16) == (16 if name == "zeroshot" else 0)
    assert v.ranks_targets == (name == "oracle")


def test_pick_first_gold_and_seeded_random():
    assert rr.variant("first").pick(3, seed=0, retrieval_index=5) == 0
    assert rr.variant("gold").pick(1, seed=0, retrieval_index=5) == 0
    assert rr.variant("random").pick(4, 7, 3) == rr.choose_random(4, 7, 3)
    with pytest.raises(NotImplementedError, match="zeroshot"):
        rr.variant("zeroshot").pick(4, 0, 1)


def test_row_columns_per_variant():
    assert rr.variant("none").row(4, 16, "lm") == {
        "k": None, "rerank": "none", "rerank_tokens": None, "scorer_model": None}
    assert rr.variant("zeroshot").row(4, 16, "lm") == {
        "k": 4, "rerank": "zeroshot", "rerank_tokens": 16, "scorer_model": "lm"}
    assert rr.variant("oracle").row(4, 16, "lm") == {
        "k": 4, "rerank": "oracle", "rerank_tokens": None, "scorer_model": None}


def test_unknown_variant_names_the_choices():
    with pytest.raises(ConfigError, match="Did you mean.*zeroshot"):
        rr.variant("zero-shot")


def test_settings_resolve_once_and_check_together():
    s = run_settings(max_length=32, stride=4, retrieval_stride=None, doc_max_tokens=4,
                     rerank="zeroshot", rerank_tokens=4, window_bos="auto")
    assert isinstance(s.rerank, rr.ZeroShot)
    assert (s.retrieval_stride, s.window_bos) == (4, False)  # null = stride; auto, no BOS
    # 24 + 4 + 4 = 32 is not below 32 with zero-shot's s', but 24 + 4 is without it
    with pytest.raises(ConfigError, match=r"\+ rerank_tokens \(4\) must be below"):
        run_settings(max_length=32, stride=4, doc_max_tokens=24, rerank="zeroshot",
                     rerank_tokens=4)
    assert run_settings(max_length=32, stride=4, doc_max_tokens=24, rerank="oracle",
                        rerank_tokens=4).ralm.doc_max_tokens == 24
    # no retrieval: the document budget does not apply
    assert not run_settings(max_length=32, stride=4, doc_max_tokens=40,
                            rerank="none").rerank.retrieves


def test_retrieval_file_short_form_and_conflict():
    base = run_settings()
    a = RunSettings.of(base.ralm, seed=0, batch_size=1, model_adds_bos=True, from_file="f.json")
    assert a.retrieval_file == "f.json" and a.window_bos is True
    own = replace(base.ralm, retrieval_file="g.json")
    with pytest.raises(ConfigError, match="name different files"):
        RunSettings.of(own, seed=0, batch_size=1, model_adds_bos=False, from_file="f.json")


def _csv(v):
    return "" if v is None else str(v)


def test_row_reads_as_the_committed_table1_rows():
    """Each Table 1 row's settings columns (as the earlier code wrote them), rebuilt from its
    composed config."""
    rows = {(r["model"], r["rerank"]): r for r in csv.DictReader(TABLE1_CSV.open())}
    assert len(rows) == 12
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for (model, rerank), row in rows.items():
            cfg = compose("config", overrides=["experiment=ralm/table1", f"model={model}",
                                               f"ralm/rerank={rerank}"])
            ralm = instantiate(cfg.ralm, _convert_="all")
            s = RunSettings.of(ralm, seed=cfg.seed, batch_size=cfg.batch_size,
                               model_adds_bos=cfg.model.add_bos,
                               from_file=OmegaConf.select(cfg, "retrieval.from_file"))
            got = s.row(model_adds_bos=cfg.model.add_bos,
                        scorer_name=OmegaConf.select(cfg, "scorer.name") or cfg.model.name,
                        corpus_name=cfg.corpus.name)
            assert list(got) == list(ROW_KEYS)
            assert {k: _csv(v) for k, v in got.items()} == {k: row[k] for k in ROW_KEYS}, \
                (model, rerank)


def test_the_config_group_and_the_registry_name_the_same_variants():
    from ralm.settings import RERANK_GROUP, rerank_option
    assert sorted(p.stem for p in RERANK_GROUP.glob("*.yaml")) == sorted(rr.NAMES)
    for name in rr.NAMES:
        assert type(rerank_option(name)) is rr.VARIANTS[name]
    with pytest.raises(ConfigError, match=r"ralm/rerank='zero' is not an option.*'zeroshot'"):
        rerank_option("zero")


def test_a_variant_is_chosen_by_the_group_and_the_old_value_spelling_is_refused():
    from hydra.errors import InstantiationException
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["experiment=ralm/table1", "ralm/rerank=oracle"])
        assert type(instantiate(cfg.ralm).rerank) is rr.Oracle
        old = compose("config", overrides=["experiment=ralm/table1", "ralm.rerank=zeroshot"])
        with pytest.raises(InstantiationException, match=r"choose one with the config "
                           r"group, e.g. `ralm/rerank=zeroshot`"):
            instantiate(old.ralm)


def test_run_ids_hash_the_variant_by_its_name():
    from ralm.profile import id_view
    resolved = {"ralm": {"k": 4, "rerank": {"_target_": "ralm.rerank.ZeroShot"}}, "seed": 0}
    assert id_view(resolved) == {"ralm": {"k": 4, "rerank": "zeroshot"}, "seed": 0}
    assert id_view({"filco": {}}) == {"filco": {}}
