"""Per-task defaults from the paper: filtering measure (§4.2), metric (§3), field names in
prompts (reference §4), and the official-code metric variants."""
from __future__ import annotations

from dataclasses import dataclass

from ragrepro.errors import unknown_name


@dataclass(frozen=True)
class Task:
    name: str
    measure: str            # silver-context measure used in the paper's main results (§4.2)
    metric: str             # paper metric, SQuAD normalisation
    metric_code: str        # official eval.py variant (punctuation kept / character-level F1)
    question_prefix: str = "question"
    answer_prefix: str = "answer"
    instruction_extra: str = ""


FEVER_EXTRA = ("('SUPPORTS' or 'REFUTES')\nIf the 'context' does not provide enough information "
               "to judge the claim, use your own knowledge instead.")

TASKS: dict[str, Task] = {
    "nq": Task("nq", "strinc", "em_squad", "em_filco_code"),
    "tqa": Task("tqa", "strinc", "em_squad", "em_filco_code"),
    "hotpotqa": Task("hotpotqa", "cxmi", "f1_squad", "f1_char_filco_code"),
    "eli5": Task("eli5", "cxmi", "f1_squad", "f1_char_filco_code"),
    "fever": Task("fever", "lexical", "accuracy", "em_filco_code", "claim", "judgement",
                  FEVER_EXTRA),
    "wow": Task("wow", "cxmi", "f1_squad", "f1_char_filco_code", "query", "response"),
    # Embedded mini sets: vital-qa / fanout-grounded are short-answer extractive QA, like NQ.
    "qa": Task("qa", "strinc", "em_squad", "em_filco_code"),
}


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise unknown_name("filco task", name, TASKS)
    return TASKS[name]
