"""Loaders for local files (conf/dataset/*.yaml `_target_`s): plain text and Pile-style JSONL
for perplexity, the QARecord schema as JSON/JSONL, and DPR retriever-results files.

Every loader takes the dataset's common keys (name, task, variant, split, limit) plus its own; `file_help` (from the YAML) says what
`path` must point to when it is missing."""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import DataError
from ..io import iter_jsonl, iter_jsonl_numbered, read_json, read_text
from .common import finish_docs, finish_qa, need_path
from .records import LMDoc, Passage, QARecord


# ---- language modelling ---------------------------------------------------------------
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


def text_file(*, name: str, task: str, variant: str | None, split: str, limit: int | None,
              path: str | None, file_help: str) -> list[LMDoc]:
    """Documents of a local .txt (one document), .jsonl or .json ({"text": ...} each):
    local_text and the Pile subsets (RealNews, ArXiv, ...), which left the hub."""
    file = need_path(name, path, file_help)
    docs = read_text_docs(file, name)
    if not any(d.text.strip() for d in docs):  # before a model loads: nothing would be scored
        raise DataError(f"{file}: no text to evaluate (the file is empty, or every record's "
                        f"'text' is); dataset {name!r} needs {file_help}.")
    return finish_docs(docs, name, split, limit)


# ---- question answering -----------------------------------------------------------------
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


def read_qa_records(path: Path, split: str) -> list[QARecord]:
    """QARecords of a JSON list or JSONL file; split `all` keeps every record."""
    if path.suffix == ".jsonl":
        out = [qa_record_from_dict(r, f"{path}:{lineno}")
               for lineno, r in iter_jsonl_numbered(path)]
    else:
        data = read_json(path)
        if not isinstance(data, list):
            raise DataError(f"{path}: expected a JSON list of QA records.")
        out = [qa_record_from_dict(r, f"{path}: item {i}") for i, r in enumerate(data)]
    return [r for r in out if split == "all" or r.split == split]


def qa_file(*, name: str, task: str, variant: str | None, split: str, limit: int | None,
            path: str | None, file_help: str, hops: int | None = None) -> list[QARecord]:
    """QA records in the QARecord schema from a local JSON/JSONL file (local_qa)."""
    records = read_qa_records(need_path(name, path, file_help), split)
    return finish_qa(records, name, split, limit, hops)


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


def read_dpr_file(path: Path, name: str, split: str) -> list[QARecord]:
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


def dpr_file(*, name: str, task: str, variant: str | None, split: str, limit: int | None,
             path: str | None, file_help: str, hops: int | None = None) -> list[QARecord]:
    """Questions with their retrieved passages from a DPR retriever-results JSON/JSONL."""
    records = read_dpr_file(need_path(name, path, file_help), name, split)
    return finish_qa(records, name, split, limit, hops)
