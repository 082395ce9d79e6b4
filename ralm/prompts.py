"""In-Context RALM open-domain QA prompts, exactly as the official eval_qa.py builds them.

    0 docs:  "Answer these questions:\\nQ: {q}\\nA:"
    1 doc:   "{title}\\n\\n{text}\\n\\nBased on this text, answer these questions:\\nQ: {q}\\nA:"
    k >= 2:  "{title}\\n\\n{text}" joined by "\\n\\n", then
             "\\n\\nBased on these texts, answer these questions:\\nQ: {q}\\nA:"
"""
from __future__ import annotations

from collections.abc import Sequence

QA_NO_DOCS = "Answer these questions:\nQ: {question}\nA:"
QA_ONE_DOC = "{doc}\n\nBased on this text, answer these questions:\nQ: {question}\nA:"
QA_MANY_DOCS = "{docs}\n\nBased on these texts, answer these questions:\nQ: {question}\nA:"
DOC = "{title}\n\n{text}"


def normalize_question(question: str) -> str:
    """Official eval_qa.py: append "?" when missing, lower-case the first character
    (commit 449637a; earlier versions upper-cased it)."""
    if not question.endswith("?"):
        question = question + "?"
    return question[:1].lower() + question[1:]


def format_doc(title: str, text: str) -> str:
    return DOC.format(title=title, text=text)


def qa_prompt(question: str, docs: Sequence[tuple[str, str]] = ()) -> str:
    """The prompt for `question` with documents given as (title, text), best first."""
    if not docs:
        return QA_NO_DOCS.format(question=question)
    if len(docs) == 1:
        return QA_ONE_DOC.format(doc=format_doc(*docs[0]), question=question)
    return QA_MANY_DOCS.format(docs="\n\n".join(format_doc(t, x) for t, x in docs),
                               question=question)
