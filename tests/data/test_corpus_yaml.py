"""Every corpus config (conf/corpus/*.yaml) builds the corpus the name-switch `load_corpus` built
(issue 15): same name, settings, source identity, passages and cache fingerprint. Expected
values in corpus_records.json come from `load_corpus` before its `if name == ...` switch was
replaced (commit 2381603); a tiny dictd pair and a DPR TSV stand in for the local files."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragrepro.errors import DataError
from ragrepro.paths import CONF_DIR
from ragrepro.retrieval.corpus import content_fingerprint

EXPECTED_FILE = Path(__file__).parent / "corpus_records.json"
TSV = "id\ttext\ttitle\n1\tfirst passage text here\tAlpha\n2\tsecond one\tBeta\n3\tthird\tAlpha\n"

CASES: list[tuple[str, dict]] = [
    ("wiki-vital", {}), ("wiki-vital", {"chunk_words": 100}),
    ("wiki-vital", {"exclude_titles": ["Carmen", "Paris"]}),
    ("foldoc", {"path": "{root}/dictd"}), ("foldoc", {"path": "{root}/dictd", "chunk_words": 20}),
    ("foldoc", {"path": "{root}/nodictd"}),
    ("wikipedia-dpr", {}), ("wikipedia-dpr", {"path": "{root}/psgs.tsv"}),
    ("wikipedia-dpr", {"path": "{root}/psgs.tsv", "chunk_words": 2,
                       "exclude_titles": ["Beta"]}),
]


def case_id(name: str, overrides: dict) -> str:
    return name + "".join(f" {k}={v}" for k, v in sorted(overrides.items()))


def outcome(name: str, overrides: dict, root: Path) -> dict | str:
    given = {k: v.format(root=root) if isinstance(v, str) else v for k, v in overrides.items()}
    node = OmegaConf.merge(OmegaConf.load(CONF_DIR / "corpus" / f"{name}.yaml"), given)
    try:
        corpus = instantiate(node, _convert_="all")
        out: dict = {"name": corpus.name, "settings": corpus.settings}
        source = dict(corpus._source_id or {})
        out["source"] = {k: v for k, v in source.items() if k not in ("path", "mtime")}
        out["file"] = str(source.get("path")).replace(str(root), "<root>") if source else None
        try:
            out["content"] = [len(corpus.passages), content_fingerprint(corpus.passages)]
        except DataError as e:  # a file-backed corpus without its file fails only when read
            out["content"] = f"error: {type(e).__name__}"
        if "mtime" not in source:  # a real file's key holds its mtime: not comparable here
            out["fingerprint"] = corpus.fingerprint()
        return out
    except InstantiationException as e:
        err = e.__cause__ or e
        return f"error: {type(err).__name__}: {str(err).replace(str(root), '<root>')}"


@pytest.fixture(scope="module")
def corpus_root(tmp_path_factory):
    from test_dataset_records import write_dictd

    root = tmp_path_factory.mktemp("corpora")
    write_dictd(root / "dictd")
    (root / "psgs.tsv").write_text(TSV, encoding="utf-8")
    return root


def compute_all(root: Path) -> dict:
    return {case_id(n, o): outcome(n, o, root) for n, o in CASES}


@pytest.mark.parametrize("name,overrides", CASES, ids=[case_id(n, o) for n, o in CASES])
def test_corpus_is_the_old_loaders_corpus(corpus_root, name, overrides):
    expected = json.loads(EXPECTED_FILE.read_text(encoding="utf-8"))
    assert outcome(name, overrides, corpus_root) == expected[case_id(name, overrides)]
