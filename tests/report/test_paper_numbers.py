"""The papers' numbers as data: exact values, their source, their setting."""
from __future__ import annotations

import pytest

from ragrepro.errors import ConfigError
from ragrepro.report.paper import find, lookup, paper_table, papers


def test_ralm_table1_cell_loads_exactly():
    n = lookup("ralm", "table1", model="gpt2-small", retrieval="bm25", rerank="zero-shot",
               dataset="wikitext-103")
    assert n.value == 28.6
    assert (n.row, n.column) == ("GPT-2 S, BM25, zero-shot", "WT-103")
    assert n.setting["metric"] == "ppl_word" and n.setting["stride"] == 4
    assert n.setting["query_len"] == 32 and n.setting["split"] == "test"
    assert "ralm table1" in n.source


def test_filco_table5_cell_loads_exactly():
    n = lookup("filco", "table5", method="filco", top_k=5, dataset="nq")
    assert n.value == 61.8
    assert n.setting["model"] == "flan-t5-xl"
    assert n.setting["metric"] == "em_filco_code"


@pytest.mark.parametrize("paper,table,keys,value", [
    ("ralm", "table1", {"model": "gpt2-xl", "retrieval": "none", "dataset": "freelaw"}, 8.0),
    ("ralm", "table1", {"model": "gpt2-medium", "retrieval": "bm25", "rerank": "predictive",
                            "dataset": "wikitext-103"}, 19.7),
    ("ralm", "table2", {"model": "llama-33b", "retrieval": "bm25"}, 6.1),
    ("ralm", "table3", {"model": "gpt2-large", "reranker": "gpt2-small", "dataset": "realnews"}, 10.7),
    ("ralm", "table4", {"model": "llama-13b", "retrieval": "dpr", "dataset": "triviaqa"}, 60.1),
    ("ralm", "table5", {"model": "gpt-j-6b", "retrieval": "none", "dataset": "realnews"}, 9.2),
    ("filco", "table1", {"dataset": "eli5", "split": "train"}, 273.0),
    ("filco", "table2", {"measure": "precision", "dataset": "eli5", "top_k": 1}, 97.7),
    ("filco", "table3", {"method": "silver", "dataset": "wow"}, 71.5),
    ("filco", "table4", {"model": "llama2-7b", "measure": "cxmi", "dataset": "fever"}, 92.3),
    ("filco", "fig4_delta", {"model": "flan-t5-xl", "dataset": "average"}, 2.8),
    ("filco", "fig4_delta", {"model": "llama2-7b", "dataset": "nq"}, 8.6),
])
def test_more_cells(paper, table, keys, value):
    assert lookup(paper, table, **keys).value == value


def test_dash_cells_are_none_not_dropped():
    n = lookup("ralm", "table1", model="gpt2-small", rerank="predictive", dataset="arxiv")
    assert n.value is None
    assert len(paper_table("ralm", "table1")) == 16 * 5  # every cell, "–" included


def test_settings_merge_table_column_row():
    # Table 5's caption: RealNews on the dev split, WT-103 on test.
    assert lookup("ralm", "table5", model="gpt-neo-1.3b", retrieval="bm25",
                  dataset="realnews").setting["split"] == "dev"
    assert lookup("ralm", "table5", model="gpt-neo-1.3b", retrieval="bm25",
                  dataset="wikitext-103").setting["split"] == "test"
    # FilCo Table 3: the row's metric (unigram precision) overrides the task metric.
    assert lookup("filco", "table3", method="full", dataset="nq").setting["metric"] == \
        "unigram_precision"
    # Table 4 QA documents are a row setting.
    assert lookup("ralm", "table4", model="llama-7b", retrieval="dpr",
                  dataset="nq").setting["num_docs"] == 2


def test_every_table_is_rectangular_and_numeric():
    for paper, info in papers().items():
        for table in info["tables"]:
            cells = paper_table(paper, table)
            assert cells, (paper, table)
            assert all(c.value is None or isinstance(c.value, float) for c in cells)


def test_riches_has_no_numbers_and_says_so():
    info = papers()["riches"]
    assert info["tables"] == {}
    assert "No RICHES number is available" in info["figures_without_numbers"]


def test_lookup_errors_name_the_keys():
    with pytest.raises(ConfigError, match="Keys of this table"):
        lookup("ralm", "table1", model="gpt2-small", dataset="wikitext-103")  # 4 rows match
    with pytest.raises(ConfigError, match="No ralm table1 cell"):
        lookup("ralm", "table1", model="gpt5")
    with pytest.raises(ConfigError, match="Unknown paper"):
        lookup("ralmx", "table1")
    assert len(find("ralm", "table1", model="gpt2-small", dataset="wikitext-103")) == 4
