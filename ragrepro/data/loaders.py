"""Dataset loaders: every dataset config (conf/dataset/*.yaml) instantiates one of these.

    load_lm_docs(name, split, variant, path, limit) -> list[LMDoc]
    load_qa(name, split, path, limit, hops)         -> list[QARecord]

Embedded (offline) datasets: wiki-vital (LM), vital-qa, vital-qa-bridge, fanout-grounded (QA).
Hub datasets keep their real loading path and raise OfflineError with instructions when the
data is not reachable. Local files: DPR retriever-results JSON, Pile-style JSONL, QARecord
JSON/JSONL, plain text. `limit` keeps the first N records in file order (deterministic).
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataError, unknown_name
from ..io import iter_jsonl, iter_jsonl_numbered, read_json, read_text
from . import vital
from .hub import load_hub_split
from .records import LMDoc, Passage, QARecord

log = logging.getLogger(__name__)

VITAL_QA_FILE = "vital_qa.jsonl"
# Version of the embedded vital-qa file; conf/dataset/vital-qa*.yaml record it as `variant`.
# v2: article-disjoint train/dev/test splits (v1 split by qid and shared gold articles).
VITAL_QA_VERSION = "embedded-v2"
VITAL_QA_FIELDS = ("qid", "question", "answers", "gold_titles", "hops", "split")
SPLITS = ("train", "train-nodev", "dev", "test", "all")
EMBEDDED_LM = "dataset=wiki-vital"
EMBEDDED_QA = "dataset=vital-qa (or vital-qa-bridge, fanout-grounded)"


def _take(items: list, limit: int | None) -> list:
    if limit is None:
        return items
    if int(limit) < 1:
        raise ConfigError(f"limit={limit}: use a positive number of examples, or null for all.")
    return items[: int(limit)]


def _need_path(name: str, path: str | None, what: str) -> Path:
    if not path:
        raise ConfigError(f"dataset {name!r} is read from a local file: set dataset.path=... "
                          f"({what}).")
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{p}: file not found (dataset {name!r}, {what}).")
    return p


# ======================================================================================
# Language modelling
# ======================================================================================
WIKITEXT_VARIANTS = ("wikitext-103-v1", "wikitext-103-raw-v1")
PILE_SUBSETS = {"realnews": "RealNews", "arxiv": "ArXiv", "stackexchange": "StackExchange",
                "freelaw": "FreeLaw"}


def join_wikitext_rows(texts: Iterable[str]) -> str:
    """The official eval_lm.py join: rows concatenated with "", an empty row becomes " \\n"."""
    return "".join(t if t else " \n" for t in texts)


def read_text_docs(path: Path, name: str, field: str = "text") -> list[LMDoc]:
    """A .txt file is one document; a .jsonl file has one document per line in `field`
    (the Pile's {"text": ..., "meta": ...} layout); a .json file is a list of such objects."""
    suffix = "".join(path.suffixes[-2:]) if path.suffix in (".zst", ".gz") else path.suffix
    if suffix in (".jsonl.zst", ".json.gz", ".jsonl.gz", ".zst", ".gz"):
        raise DataError(f"{path}: compressed file. Decompress it first (e.g. `zstd -d` or "
                        f"`gunzip`) and point dataset.path to the .jsonl.")
    if path.suffix == ".jsonl":
        return [LMDoc(doc_id=f"{name}-{i}", text=str(r[field]), title=str(r.get("title", "")))
                for i, r in enumerate(iter_jsonl(path, required=(field,)))]
    if path.suffix == ".json":
        data = read_json(path)
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of objects with a {field!r} field.")
        for i, r in enumerate(data):
            if not isinstance(r, dict) or field not in r:
                raise DataError(f"{path}: item {i} has no {field!r} field.")
        return [LMDoc(doc_id=f"{name}-{i}", text=str(r[field]), title=str(r.get("title", "")))
                for i, r in enumerate(data)]
    return [LMDoc(doc_id=path.stem, text=read_text(path), title="")]


def load_lm_docs(name: str, split: str = "test", variant: str | None = None,
                 path: str | None = None, limit: int | None = None, **_: Any) -> list[LMDoc]:
    """Documents for perplexity evaluation (see module doc for the names)."""
    if name == "wiki-vital":
        if split not in ("dev", "test"):
            raise ConfigError(f"wiki-vital has held-out splits dev and test, not {split!r}.")
        docs = vital.lm_docs(split)
    elif name == "local_text":
        docs = read_text_docs(_need_path(name, path, "a UTF-8 .txt file, or .jsonl with a "
                                                     "'text' field per line"), name)
    elif name == "wikitext-103":
        variant = variant or "wikitext-103-v1"
        if variant not in WIKITEXT_VARIANTS:
            raise ConfigError(f"wikitext-103 variant {variant!r}; use one of "
                              f"{list(WIKITEXT_VARIANTS)} (the official RALM README uses "
                              f"wikitext-103-v1, tokenized with <unk>).")
        if path:
            docs = read_text_docs(_need_path(name, path, "a text dump of the split"), name)
        else:
            rows, _hub = load_hub_split("Salesforce/wikitext", variant,
                                        {"dev": "validation"}.get(split, split), EMBEDDED_LM,
                                        split_map={})
            docs = [LMDoc(doc_id=f"{variant}-{split}", title="",
                          text=join_wikitext_rows(rows["text"]))]
    elif name in PILE_SUBSETS:
        docs = read_text_docs(_need_path(
            name, path, f"the Pile's {PILE_SUBSETS[name]} {split} subset as .jsonl (one "
                        f"{{\"text\": ...}} per line) or .txt; it is no longer on the Hugging "
                        f"Face hub"), name)
    else:
        raise unknown_name("LM dataset", name, ["wiki-vital", "local_text", "wikitext-103",
                                                *PILE_SUBSETS])
    docs = _take(docs, limit)
    if not docs:
        raise DataError(f"dataset {name!r} split {split!r} has no documents.")
    return docs


# ======================================================================================
# Question answering (and FEVER / WoW / ELI5 in the same record)
# ======================================================================================
def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ConfigError(f"split={split!r}; use one of {list(SPLITS)}.")


def vital_qa_path() -> Path:
    return Path(str(resources.files("ragrepro.data") / "embedded" / VITAL_QA_FILE))


def load_vital_qa(split: str = "test", hops: int | None = None) -> list[QARecord]:
    """The embedded hand-written QA set over wiki-vital leads (see docs/datasets.md)."""
    _check_split(split)
    out = []
    for r in iter_jsonl(vital_qa_path(), required=VITAL_QA_FIELDS):
        if split != "all" and r["split"] != split:
            continue
        if hops is not None and int(r["hops"]) != int(hops):
            continue
        out.append(QARecord(qid=r["qid"], question=r["question"], answers=list(r["answers"]),
                            gold_titles=list(r["gold_titles"]), task="qa", hops=int(r["hops"]),
                            split=r["split"], meta={"bridge_entity": r.get("bridge_entity"),
                                                    "topic": r.get("topic"),
                                                    "source": "vital-qa"}))
    return out


def dpr_record(item: Mapping[str, Any], i: int, name: str, split: str) -> QARecord:
    """One item of a DPR retriever-results file: question, answers, ctxs[{title, text}]."""
    ctxs = item.get("ctxs") or []
    passages = [Passage(pid=str(c.get("id", f"{i}-{j}")), title=str(c.get("title", "")),
                        text=str(c["text"])) for j, c in enumerate(ctxs)]
    answers = item["answers"]
    if isinstance(answers, str):
        answers = [answers]
    meta = {"source": name}
    if "target" in item:
        meta["target"] = item["target"]
    if ctxs and "has_answer" in ctxs[0]:
        meta["ctx_has_answer"] = [bool(c.get("has_answer")) for c in ctxs]
    return QARecord(qid=str(item.get("id", item.get("qid", f"{name}-{i}"))),
                    question=str(item["question"]), answers=[str(a) for a in answers],
                    passages=passages, split=split, meta=meta)


def load_dpr_file(path: Path, name: str, split: str) -> list[QARecord]:
    if path.suffix == ".jsonl":
        items: list[Any] = list(iter_jsonl(path, required=("question", "answers")))
    else:
        items = read_json(path)
        if not isinstance(items, list):
            raise DataError(f"{path}: a DPR retriever-results file is a JSON list of "
                            f"{{question, answers, ctxs}} objects.")
    out = []
    for i, item in enumerate(items):
        missing = [k for k in ("question", "answers") if not isinstance(item, dict) or k not in item]
        if missing:
            raise DataError(f"{path}: item {i} lacks {missing} (DPR format: question, answers, "
                            f"ctxs[title, text]).")
        try:
            out.append(dpr_record(item, i, name, split))
        except KeyError as e:
            raise DataError(f"{path}: item {i}: a ctx lacks the field {e}.") from e
    return out


def qa_record_from_dict(r: Mapping[str, Any], where: str) -> QARecord:
    """The QARecord schema as JSON (local_qa)."""
    for key in ("qid", "question", "answers"):
        if key not in r:
            raise DataError(f"{where}: record lacks field {key!r} (needs qid, question, answers; "
                            f"optional gold_titles, passages, task, hops, split, meta).")
    answers = r["answers"]
    if isinstance(answers, str) or not isinstance(answers, list):
        raise DataError(f"{where}: 'answers' must be a list of strings.")
    try:
        passages = [Passage(pid=str(p.get("pid", j)), title=str(p.get("title", "")),
                            text=str(p["text"])) for j, p in enumerate(r.get("passages") or [])]
    except (KeyError, AttributeError) as e:
        raise DataError(f"{where}: every passage needs a 'text' field.") from e
    return QARecord(qid=str(r["qid"]), question=str(r["question"]),
                    answers=[str(a) for a in answers],
                    gold_titles=[str(t) for t in r.get("gold_titles") or []], passages=passages,
                    task=str(r.get("task", "qa")), hops=int(r.get("hops", 1)),
                    split=str(r.get("split", "test")), meta=dict(r.get("meta") or {}))


def load_local_qa(path: Path, split: str) -> list[QARecord]:
    if path.suffix == ".jsonl":
        out = [qa_record_from_dict(r, f"{path}:{lineno}")
               for lineno, r in iter_jsonl_numbered(path)]
    else:
        data = read_json(path)
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of QA records.")
        out = [qa_record_from_dict(r, f"{path}: item {i}") for i, r in enumerate(data)]
    return [r for r in out if split == "all" or r.split == split]


# ---- hub converters (pure: one hub row -> QARecord) ----------------------------------
def nq_open_row(r: Mapping[str, Any], i: int, split: str) -> QARecord:
    return QARecord(qid=f"nq-open-{split}-{i}", question=r["question"], answers=list(r["answer"]),
                    split=split, meta={"source": "nq_open"})


def trivia_qa_row(r: Mapping[str, Any], i: int, split: str) -> QARecord:
    ans = r["answer"]
    answers = list(dict.fromkeys([ans["value"], *ans.get("aliases", [])]))
    return QARecord(qid=str(r.get("question_id", f"tqa-{i}")), question=r["question"],
                    answers=answers, split=split, meta={"source": "trivia_qa"})


def hotpot_row(r: Mapping[str, Any], i: int, split: str) -> QARecord:
    ctx = r["context"]
    passages = [Passage(pid=f"{r['id']}-{j}", title=t, text="".join(s))
                for j, (t, s) in enumerate(zip(ctx["title"], ctx["sentences"]))]
    gold = list(dict.fromkeys(r["supporting_facts"]["title"]))
    return QARecord(qid=str(r["id"]), question=r["question"], answers=[r["answer"]],
                    gold_titles=gold, passages=passages, task="multihop", hops=2, split=split,
                    meta={"source": "hotpot_qa", "type": r.get("type"), "level": r.get("level")})


KILT_TASKS = {"eli5": "lfqa", "fever": "fact", "wow": "dialog"}


def kilt_row(r: Mapping[str, Any], i: int, split: str, config: str) -> QARecord:
    """KILT: input (FEVER claim; WoW history joined by newlines), output[{answer, provenance}]."""
    outputs = r.get("output") or []
    answers = [o["answer"] for o in outputs if o.get("answer")]
    titles = [p.get("title") or p.get("wikipedia_title") for o in outputs
              for p in (o.get("provenance") or [])]
    return QARecord(qid=str(r["id"]), question=r["input"], answers=answers,
                    gold_titles=list(dict.fromkeys(t for t in titles if t)),
                    task=KILT_TASKS[config], split=split, meta={"source": f"kilt_{config}"})


def musique_row(r: Mapping[str, Any], i: int, split: str) -> QARecord:
    paragraphs = r.get("paragraphs") or []
    passages = [Passage(pid=f"{r['id']}-{p.get('idx', j)}", title=p.get("title", ""),
                        text=p["paragraph_text"]) for j, p in enumerate(paragraphs)]
    gold = [p.get("title", "") for p in paragraphs if p.get("is_supporting")]
    decomposition = r.get("question_decomposition") or []
    return QARecord(qid=str(r["id"]), question=r["question"],
                    answers=[r["answer"], *(r.get("answer_aliases") or [])], gold_titles=gold,
                    passages=passages, task="multihop", hops=max(2, len(decomposition)),
                    split=split, meta={"source": "musique",
                                       "answerable": r.get("answerable", True)})


HubSpec = tuple[str, str | None, Callable[..., QARecord]]
HUB_QA: dict[str, HubSpec] = {
    "nq-open": ("google-research-datasets/nq_open", "nq_open", nq_open_row),
    "triviaqa": ("mandarjoshi/trivia_qa", "rc.nocontext", trivia_qa_row),
    "hotpotqa": ("hotpotqa/hotpot_qa", "distractor", hotpot_row),
    "musique": ("dgslibisey/MuSiQue", None, musique_row),
}


def _from_hub(name: str, split: str, limit: int | None) -> list[QARecord]:
    if name in KILT_TASKS:
        rows, hub_split = load_hub_split("facebook/kilt_tasks", name, split, EMBEDDED_QA)
        conv: Callable[..., QARecord] = lambda r, i, s: kilt_row(r, i, s, name)
    else:
        repo, config, conv = HUB_QA[name]
        rows, hub_split = load_hub_split(repo, config, split, EMBEDDED_QA)
    n = len(rows) if limit is None else min(len(rows), int(limit))
    out = []
    for i in range(n):
        rec = conv(rows[i], i, split)
        rec.meta["hub_split"] = hub_split
        out.append(rec)
    return out


def hub_split_source(name: str | None, split: str | None, path: str | None = None) -> str | None:
    """For a hub QA dataset, where split `split` comes from (recorded in every row)."""
    from .hub import DEFAULT_SPLIT_MAP, split_source

    if path or not split or (name not in HUB_QA and name not in KILT_TASKS):
        return None
    return split_source(split, DEFAULT_SPLIT_MAP.get(split, split))


def load_qa(name: str, split: str = "test", path: str | None = None, limit: int | None = None,
            hops: int | None = None, **_: Any) -> list[QARecord]:
    """QA records (see module doc). `hops` keeps only records with that many hops."""
    if name == "vital-qa":
        records = load_vital_qa(split, hops)
    elif name == "vital-qa-bridge":
        records = load_vital_qa(split, 2)
    elif name == "fanout-grounded":
        from .fanout import load_fanout_grounded

        records = load_fanout_grounded("dev" if split in ("dev", "all") else split)
    elif name in ("nq-open-dpr", "triviaqa-dpr"):
        records = load_dpr_file(_need_path(
            name, path, "a DPR retriever-results JSON: nq-test.json from the DPR release, or "
                        "trivia-test-dpr-results.json from the In-Context RALM GCS bucket"),
            name, split)
    elif name == "local_qa":
        records = load_local_qa(_need_path(name, path, "JSON/JSONL records with qid, question, "
                                                       "answers"), split)
    elif name == "musique" and path:
        p = _need_path(name, path, "MuSiQue-Ans JSONL")
        records = [musique_row(r, i, split) for i, r in enumerate(iter_jsonl(
            p, required=("id", "question", "answer")))]
    elif name in HUB_QA or name in KILT_TASKS:
        if path:
            raise ConfigError(f"dataset {name!r} loads from the hub; for a local copy convert "
                              f"it to the QARecord schema and use dataset=local_qa.")
        records = _from_hub(name, split, limit)
    else:
        raise unknown_name("QA dataset", name, ["vital-qa", "vital-qa-bridge",
                                                "fanout-grounded", "nq-open-dpr",
                                                "triviaqa-dpr", "local_qa", *HUB_QA,
                                                *KILT_TASKS])
    if hops is not None and name != "vital-qa":
        records = [r for r in records if r.hops == int(hops)]
    records = _take(records, limit)
    if not records:
        raise DataError(f"dataset {name!r} split {split!r}"
                        + (f" hops={hops}" if hops is not None else "") + " has no records.")
    return records
