"""Official-format retrieval files (issue 9): write/read round trip, window checks that name
the differing setting, and a full run on a local text with a retrieval file."""
import json

import pytest
from ralm_testdata import DOCS, TEXT

from ragrepro.errors import ConfigError, DataError
from ralm import official_format as off
from ralm.windows import make_windows


def build_entries(n_tokens, L, s, docs_for):
    wins = make_windows(n_tokens, L, s)
    return [off.entry(w, f"future {w.index}", "" if w.index == 0 else f"q{w.index}",
                      [] if w.index == 0 else docs_for(w.index)) for w in wins]


def test_round_trip_keeps_every_windows_documents(tmp_path):
    entries = build_entries(300, 64, 8, lambda i: [DOCS[i % 3], DOCS[(i + 1) % 3]])
    path = tmp_path / "r.json"
    off.write_file(path, [entries], joined=True)
    raw = json.loads(path.read_text())
    assert isinstance(raw, list) and isinstance(raw[0], dict)  # the official single list
    assert raw[0]["begin_location"] == 0 and raw[1]["begin_location"] == 64
    assert raw[1]["end_location"] == 72
    back = off.read_file(path)
    assert len(back) == 1 and len(back[0]) == len(entries)
    for a, b in zip(entries, back[0]):
        assert off.docs_of(a) == off.docs_of(b)
    off.check_windows(path, back[0], make_windows(300, 64, 8), 8, 64, 300)


def test_per_document_files_are_lists_of_lists(tmp_path):
    e1 = build_entries(100, 64, 8, lambda i: [DOCS[0]])
    e2 = build_entries(80, 64, 8, lambda i: [DOCS[1]])
    path = tmp_path / "r.json"
    off.write_file(path, [e1, e2], joined=False)
    back = off.read_file(path)
    assert [len(t) for t in back] == [len(e1), len(e2)]


@pytest.mark.parametrize("n,L,s,setting", [(300, 64, 16, "stride"), (300, 128, 8, "max_length"),
                                           (290, 64, 8, "tokenizer")])
def test_mismatched_file_names_the_setting(tmp_path, n, L, s, setting):
    entries = build_entries(300, 64, 8, lambda i: [DOCS[0]])
    with pytest.raises(ConfigError, match=setting):
        off.check_windows(tmp_path / "r.json", entries, make_windows(n, L, s), s, L, n)


def test_malformed_file_is_a_data_error(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([{"begin_location": 0}]))
    with pytest.raises(DataError, match="end_location"):
        off.read_file(p)
    with pytest.raises(DataError, match="not found"):
        off.read_file(tmp_path / "missing.json")


def test_doc_text_layout_is_the_official_one():
    assert off.doc_text({"title": "T", "text": "x"}) == "T\nx"
    assert off.doc_text({"text": "T\nx"}) == "T\nx"


@pytest.mark.slow
def test_local_text_with_retrieval_file_end_to_end(tmp_path, monkeypatch, smollm):
    """`ragrepro experiment=ralm/table1 dataset=local_text dataset.path=T
    retrieval.from_file=J model=smollm2-135m` uses the file's documents window by window
    and writes the same documents back in retrieval.json."""
    from hydra import compose, initialize_config_dir

    from ragrepro.paths import CONF_DIR
    from ragrepro.runner import execute

    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path / "results"))
    text_path = tmp_path / "t.txt"
    text_path.write_text(TEXT, encoding="utf-8")
    n = len(smollm.encode(TEXT))
    L, s = 64, 16
    entries = build_entries(n, L, s, lambda i: [DOCS[i % 3], DOCS[(i + 1) % 3]])
    rfile = tmp_path / "retrieval.json"
    off.write_file(rfile, [entries], joined=True)
    overrides = ["experiment=ralm/table1", "dataset=local_text", f"dataset.path={text_path}",
                 f"retrieval.from_file={rfile}", "model=smollm2-135m", "wandb.mode=disabled",
                 f"ralm.max_length={L}", f"ralm.stride={s}", "ralm.doc_max_tokens=24",
                 "ralm/rerank=first", "limit=null"]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    metrics = execute(cfg)
    assert metrics["n_windows"] == len(entries)
    assert metrics["n_windows_with_doc"] == len(entries) - 1
    run_dir = next((tmp_path / "results" / "ralm" / "table1").iterdir())
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    for rec in samples[1:]:
        assert rec["doc_title"] == DOCS[rec["window"] % 3]["title"]
    written = off.read_file(run_dir / "retrieval.json")[0]
    assert [off.docs_of(e) for e in written] == [off.docs_of(e) for e in entries]
    assert [e["end_location"] for e in written] == [e["end_location"] for e in entries]
    # a file made for another stride is refused before any scoring
    bad = ["ralm.stride=8" if o.startswith("ralm.stride") else o for o in overrides]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=bad)
    with pytest.raises(ConfigError, match="stride"):
        execute(cfg)
