"""Prompt formats, one per task and model role, used identically at training and test time.

The official code trains M_gen on `question: .. \\ncontext: ..` under one instruction and tests
it on `context: .. \\nquestion: ..` under another (reference §4); `gen_format='code_test'`
reproduces that test-time format (built from the M_ctx input as replace_context.py builds it),
the default `'train'` keeps the training format. Like get_inputs.py, the M_ctx and M_gen
training inputs are stripped as a whole."""
from __future__ import annotations

from collections.abc import Sequence

from ragrepro.errors import ConfigError

from .official import replace_context_input
from .tasks import FEVER_EXTRA, Task

GEN_FORMATS = ("train", "code_test")


CTX_ANSWER_PREFIXES = ("answer", "judgement")


def ctx_prompt(task: Task, question: str, passages: Sequence[str],
               answer_prefix: str = "answer") -> str:
    """M_ctx input: question + retrieved passages -> the most helpful sentences. As
    get_inputs.py, a claim task built with answer_prefix='judgement' (`--answer_prefix
    judgement`) carries the FEVER label sentence; the README's M_ctx command does not."""
    if answer_prefix not in CTX_ANSWER_PREFIXES:
        raise ConfigError(f"filco.ctx_answer_prefix={answer_prefix!r}; use one of "
                          f"{CTX_ANSWER_PREFIXES}.")
    qp = task.question_prefix
    extra = FEVER_EXTRA if qp == "claim" and answer_prefix == "judgement" else ""
    return (f"Given the ['{qp}', 'context'], predict the most helpful sentence in the context."
            f"{extra}\n\n{qp}: {question}\ncontext: " + "\n".join(passages)).strip()


def gen_prompt(task: Task, question: str, context: str | None, fmt: str = "train",
               ctx_answer_prefix: str = "answer") -> str:
    """M_gen input. context=None drops the context line (the `q` side of CXMI).
    fmt='code_test': replace_context.py applied to this question's M_ctx input."""
    qp, ap = task.question_prefix, task.answer_prefix
    if fmt == "code_test":
        mctx = ctx_prompt(task, question, [], ctx_answer_prefix)
        return replace_context_input(task.name, mctx, context or "")
    if fmt != "train":
        raise ConfigError(f"filco.gen_format={fmt!r}; use one of {GEN_FORMATS}.")
    fields = f"['{qp}', 'context']" if context is not None else f"['{qp}']"
    head = f"Given the {fields}, predict the {ap} to the {qp}.{task.instruction_extra}\n\n"
    body = f"{qp}: {question}" + (f"\ncontext: {context}" if context is not None else "")
    return (head + body).strip()


def gen_target(task: Task, answer: str) -> str:
    """M_gen output as the code writes it: `answer: ..` (or response/judgement)."""
    return f"{task.answer_prefix}: {answer}"


def psg_prompt(task: Task, question: str, passage: str) -> str:
    """Psg baseline filter: keep or drop one whole passage (the code has no Psg script)."""
    qp = task.question_prefix
    return (f"Given the ['{qp}', 'context'], predict whether the context helps to answer the "
            f"{qp}.\n\n{qp}: {question}\ncontext: {passage}")


PSG_YES, PSG_NO = "yes", "no"

CODE_CXMI_PREFIX = "Given the ['context', 'question'], predict the answer to the question:"


def code_cxmi_inputs(question: str, sentence: str) -> tuple[str, str]:
    """The official `calc_cxmi` inputs (no space after the prefix's colon, as in the code):
    (with the sentence, without it)."""
    base = "question: " + CODE_CXMI_PREFIX + question
    return "context: " + sentence + "\n" + base, base


def clean_output(text: str, prefixes: Sequence[str] = ("answer", "response", "judgement",
                                                        "score")) -> str:
    """Our answer extraction (paper mode; `score`): keep the text after the LAST
    `<prefix>:` in any letter case ("Answer: Paris" -> "Paris"); strip. The official
    scripts' exact rule is filco.official.official_prediction (`score_code`)."""
    low = text.lower()
    cut = -1
    for p in prefixes:
        i = low.rfind(p + ":")
        if i >= 0 and i + len(p) + 1 > cut:
            cut = i + len(p) + 1
    return (text[cut:] if cut >= 0 else text).strip()
