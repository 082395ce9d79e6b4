"""Two hand-written RALM QA runs with known per-sample flips (tests/report/test_flips*.py):
against qa0docs, qa2docs turns q0 wrong (Paris -> Lyon, cut at the length budget) and q1, q4
right; q2 stays right, q3 stays wrong."""
from __future__ import annotations

from pathlib import Path

from ragrepro.tracking import Run

QUESTIONS = [  # qid, question, gold, (prediction, em, finish) in run A and in run B
    ("q0", "Capital of France?", ["Paris"], ("Paris", 1.0, "eos"), ("Lyon", 0.0, "length")),
    ("q1", "Largest planet?", ["Jupiter"], ("Saturn", 0.0, "eos"), ("Jupiter", 1.0, "eos")),
    ("q2", "Author of Hamlet?", ["Shakespeare"], ("Shakespeare", 1.0, "eos"),
     ("Shakespeare", 1.0, "eos")),
    ("q3", "Boiling point of water in C?", ["100"], ("90", 0.0, "eos"), ("", 0.0, "stop")),
    ("q4", "Chemical symbol of gold?", ["Au"], ("Ag", 0.0, "eos"), ("Au", 1.0, "stop")),
]


def qa_run(root: Path, run_id: str, side: int, docs: int) -> None:
    run = Run("ralm/table4", run_id, root)
    run.start()
    for qid, question, gold, *outs in QUESTIONS:
        pred, em, finish = outs[side]
        run.add_sample({"qid": qid, "question": question, "answers": gold,
                        "output": pred + "\nmore text", "prediction": pred, "em": em,
                        "generation": {"answer": {"finish": finish, "empty": not pred}}})
    ems = [q[3 + side][1] for q in QUESTIONS]
    run.finish({"name": "ralm/table4"}, {"em": sum(ems) / len(ems), "num_examples": len(ems)},
               {"model": "m", "num_docs": docs}, {})
