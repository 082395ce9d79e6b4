"""Every dataset config gives exactly the records the old name-switch loaders gave (issue 15).

Each case instantiates conf/dataset/<name>.yaml with a few overrides, offline: embedded data,
local files written here, a tiny FOLDOC dictd file, and the rehearsal's hub-schema fixtures
(hub datasets read through their real converters). The expected values in
dataset_records.json were computed with the loaders before the switch was replaced
(`ragrepro.data.loaders.load_qa` / `load_lm_docs`, commit 2381603): a sha256 of the records,
or the error class and message."""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import json
from pathlib import Path

import pytest
from hydra.errors import InstantiationException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragrepro import rehearsal
from ragrepro.hashing import stable_json
from ragrepro.paths import CONF_DIR

EXPECTED_FILE = Path(__file__).parent / "dataset_records.json"

HUB_QA = ("nq-open", "triviaqa", "hotpotqa", "musique", "eli5", "fever", "wow")
HUB_SPLITS = ("test", "dev", "train", "train-nodev", "validation", "nosuch")
PILE = ("realnews", "arxiv", "stackexchange", "freelaw")


def _cases() -> list[tuple[str, dict]]:
    c: list[tuple[str, dict]] = []
    c += [("wiki-vital", o) for o in ({}, {"split": "dev"}, {"limit": 3}, {"split": "train"})]
    c += [("foldoc", o) for o in ({"path": "{root}/dictd"}, {"split": "dev", "path": "{root}/dictd"},
                                  {"split": "train", "path": "{root}/dictd"}, {"limit": 2})]
    c += [("wikitext-103", o) for o in ({}, {"split": "dev"}, {"split": "train"},
                                        {"split": "validation"},
                                        {"variant": "wikitext-103-raw-v1"},
                                        {"variant": "wikitext-2"},
                                        {"path": "{root}/local/a.txt"})]
    for name in PILE:
        c += [(name, {}), (name, {"path": "{root}/pile/" + name + ".jsonl"}),
              (name, {"path": "{root}/pile/" + name + ".jsonl", "limit": 2}),
              (name, {"path": "{root}/local/missing.jsonl"})]
    c += [("local_text", o) for o in ({"path": "{root}/local/a.txt"},
                                      {"path": "{root}/local/b.jsonl"},
                                      {"path": "{root}/local/c.json"}, {})]
    for split in ("train", "dev", "test", "all", "train-nodev"):
        c += [("vital-qa", {"split": split}), ("vital-qa", {"split": split, "hops": 1}),
              ("vital-qa", {"split": split, "hops": 2}), ("vital-qa-bridge", {"split": split})]
    c += [("vital-qa", {"limit": 5}), ("vital-qa-bridge", {"limit": 5})]
    c += [("fanout-grounded", o) for o in ({}, {"split": "all"}, {"split": "test"},
                                           {"limit": 4})]
    c += [("local_qa", o) for o in ({"path": "{root}/local/qa.jsonl"},
                                    {"path": "{root}/local/qa.jsonl", "split": "dev"},
                                    {"path": "{root}/local/qa.jsonl", "split": "test"},
                                    {"path": "{root}/local/qa.json", "limit": 1},
                                    {"path": "{root}/local/qa.jsonl", "hops": 2}, {})]
    for name in ("nq-open-dpr", "triviaqa-dpr"):
        c += [(name, {}), (name, {"limit": 2}), (name, {"path": "{root}/local/missing.json"})]
    for name in HUB_QA:
        c += [(name, {"split": s}) for s in HUB_SPLITS]
        c += [(name, {"limit": 2}), (name, {"split": "dev", "limit": 1})]
    c += [("hotpotqa", {"hops": 2}), ("musique", {"hops": 2, "limit": 3}),
          ("musique", {"path": "{root}/hub/dgslibisey/MuSiQue/default/validation.jsonl"}),
          ("hotpotqa", {"path": "{root}/local/qa.jsonl"})]
    return c


CASES = _cases()


def case_id(name: str, overrides: dict) -> str:
    return name + "".join(f" {k}={v}" for k, v in sorted(overrides.items()))


def write_local_files(root: Path) -> None:
    local = root / "local"
    local.mkdir(parents=True, exist_ok=True)
    (local / "a.txt").write_text("A first line.\nA second line.\n", encoding="utf-8")
    (local / "b.jsonl").write_text('{"text": "doc one", "title": "One"}\n{"text": "doc two"}\n',
                                   encoding="utf-8")
    (local / "c.json").write_text(json.dumps([{"text": "x y z"}, {"text": "w", "title": "T"}]),
                                  encoding="utf-8")
    qa = [{"qid": "q1", "question": "Who?", "answers": ["A"], "split": "dev"},
          {"qid": "q2", "question": "What?", "answers": ["B", "b"], "hops": 2, "task": "multihop",
           "gold_titles": ["T1", "T2"], "passages": [{"pid": "p", "title": "T1", "text": "B."}],
           "meta": {"k": 1}},
          {"qid": "q3", "question": "When?", "answers": ["1999"], "split": "dev"}]
    (local / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in qa), encoding="utf-8")
    (local / "qa.json").write_text(json.dumps(qa), encoding="utf-8")


def write_dictd(folder: Path) -> None:
    """A FOLDOC-format dictd pair: 25 entries of 160 words (held-out candidates) and 2 short."""
    b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

    def num(n: int) -> str:
        out = ""
        while True:
            out, n = b64[n % 64] + out, n // 64
            if n == 0:
                return out
    body = " ".join(f"w{i}" for i in range(160))
    records = [(f"entry{j}", f"entry{j}\n\n   {{see}} {body} {j}\n") for j in range(25)]
    records += [("short", "short\n\n   " + " ".join(["s"] * 30) + "\n")]
    data, lines = b"", []
    for head, rec in records:
        raw = rec.encode()
        lines.append(f"{head}\t{num(len(data))}\t{num(len(raw))}")
        data += raw
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "foldoc.index").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with gzip.open(folder / "foldoc.dict.dz", "wb") as f:
        f.write(data)


def outcome(name: str, overrides: dict, root: Path) -> str:
    """sha256 of the records (as dicts), or `error: Class: message` (root shown as <root>)."""
    given = {k: v.format(root=root) if isinstance(v, str) else v for k, v in overrides.items()}
    limit = given.pop("limit", None)
    node = OmegaConf.merge({"limit": limit},
                           {"dataset": OmegaConf.load(CONF_DIR / "dataset" / f"{name}.yaml")},
                           {"dataset": given})
    try:
        records = instantiate(node.dataset, _convert_="all")
    except InstantiationException as e:
        err = e.__cause__ or e
        return f"error: {type(err).__name__}: {str(err).replace(str(root), '<root>')}"
    rows = [dataclasses.asdict(r) for r in records]
    return f"{len(rows)} " + hashlib.sha256(stable_json(rows).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    from ragrepro.rehearsal.fixtures import fixture_articles, write_fixtures

    root = tmp_path_factory.mktemp("datasets")
    write_fixtures(root, fixture_articles())
    write_local_files(root)
    write_dictd(root / "dictd")
    mp = pytest.MonkeyPatch()
    mp.setenv("FOLDOC_DIR", str(root / "dictd"))
    mp.setenv("HF_DATASETS_OFFLINE", "1")
    mp.setenv("RAGREPRO_DATA", str(root))  # activate() sets it; undo() restores it
    rehearsal.activate(root)  # hub datasets read the fixtures; RAGREPRO_DATA -> root
    yield root
    rehearsal.deactivate()
    mp.undo()


def compute_all(root: Path) -> dict[str, str]:
    return {case_id(n, o): outcome(n, o, root) for n, o in CASES}


@pytest.mark.parametrize("name,overrides", CASES, ids=[case_id(n, o) for n, o in CASES])
def test_records_are_the_old_loaders_records(data_root, name, overrides):
    expected = json.loads(EXPECTED_FILE.read_text(encoding="utf-8"))
    assert outcome(name, overrides, data_root) == expected[case_id(name, overrides)]
