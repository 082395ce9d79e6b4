"""In-Context RALM open-domain QA prompts, exactly as the official eval_qa.py builds them.

    0 docs:  "Answer these questions:\\nQ: {q}\\nA:"
    1 doc:   "{title}\\n\\n{text}\\n\\nBased on this text, answer these questions:\\nQ: {q}\\nA:"
    k >= 2:  "{title}\\n\\n{text}" joined by "\\n\\n", then
             "\\n\\nBased on these texts, answer these questions:\\nQ: {q}\\nA:"
"""
from __future__ import annotations

from collections.abc import Sequence

from ragrepro.errors import ConfigError

QA_NO_DOCS = "Answer these questions:\nQ: {question}\nA:"
QA_ONE_DOC = "{doc}\n\nBased on this text, answer these questions:\nQ: {question}\nA:"
QA_MANY_DOCS = "{docs}\n\nBased on these texts, answer these questions:\nQ: {question}\nA:"
DOC = "{title}\n\n{text}"
# Demonstration answers the prompts show the model (their longest bounds qa.max_new_tokens,
# ralm.qa.check_qa_budget): none, the official QA prompts are zero-shot.
DEMONSTRATIONS: tuple[str, ...] = ()


def normalize_question(question: str) -> str:
    """Official eval_qa.py: append "?" when missing, lower-case the first character
    (commit 449637a; earlier versions upper-cased it)."""
    if not question.endswith("?"):
        question = question + "?"
    return question[:1].lower() + question[1:]


def format_doc(title: str, text: str) -> str:
    return DOC.format(title=title, text=text)


def qa_prompt(question: str, docs: Sequence[tuple[str, str]] = (),
              num_docs: int | None = None) -> str:
    """The prompt for `question` with documents given as (title, text), best first.

    As eval_qa.py's build_qa_prompt, the template follows the requested `num_docs`, not the
    number of documents a record has: with num_docs >= 2 a record holding a single document
    still gets "Based on these texts" (with the documents it has). num_docs=None: len(docs)."""
    n = len(docs) if num_docs is None else int(num_docs)
    if n == 0:
        return QA_NO_DOCS.format(question=question)
    if n == 1:
        if not docs:
            # eval_qa.py fails here (ctxs[0] of an empty list); say so instead
            raise ConfigError("qa.num_docs=1 but this record has no document: give every "
                             "record a passage, or use qa.num_docs=0 (closed book).")
        return QA_ONE_DOC.format(doc=format_doc(*docs[0]), question=question)
    return QA_MANY_DOCS.format(docs="\n\n".join(format_doc(t, x) for t, x in docs[:n]),
                               question=question)
