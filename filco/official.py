"""String handling of the official FilCo scripts (zorazrw/filco@4fe80c6), for code mode.

Each function reproduces one behaviour of the released scripts, so that `score_code` and the
`gen_format=code_test` prompt are what the official pipeline would give:
- `eval_clean`: eval.py's (and query.py's) `clean_output`;
- `llama_clean`: query_llama.py's `clean_output` (lower-cases, cuts at `predictions:`);
- `official_prediction`: the prediction eval.py scores, by model family;
- `replace_context_input`: replace_context.py's test-time M_gen input, built from the M_ctx
  input (its instruction line and its question) and the filtered context.
Written from the scripts' behaviour (reference §4, §6); no code is copied.
"""
from __future__ import annotations

# eval.py cuts at these markers in this order; only the capitalised spelling is folded first
_CUTS = ("answer", "response", "judgement", "score")


def eval_clean(text: str) -> str:
    """eval.py clean_output: for each marker in order, fold its capitalised spelling
    ("Answer" -> "answer", in the whole text) and, when `marker:` occurs, keep what follows its
    last occurrence, stripped. After the `score:` cut, text before a remaining `answer:` is
    kept. Text without any marker is returned unchanged (not stripped)."""
    for marker in _CUTS:
        text = text.replace(marker.capitalize(), marker)
        if f"{marker}:" in text:
            text = text.split(f"{marker}:")[-1].strip()
    if "answer:" in text:
        text = text.split("answer:")[0].strip()
    return text


def llama_clean(text: str) -> str:
    """query_llama.py clean_output: lower-case, keep what follows the last `predictions:`."""
    text = text.lower()
    if "predictions:" in text:
        text = text.split("predictions:")[-1].strip()
    return text


def official_prediction(raw: str, family: str) -> str:
    """What eval.py scores: `clean_output(pred_answers[0])`. pred_answers comes from query.py
    (seq2seq: the same clean_output) or query_llama.py (causal: llama_clean)."""
    first = llama_clean(raw) if family == "causal" else eval_clean(raw)
    return eval_clean(first)


def _split_once(text: str, sep: str) -> tuple[str, str]:
    """text.split(sep) into two parts, as the scripts unpack it (they fail on a second sep;
    here the first one splits)."""
    head, found, tail = text.partition(sep)
    if not found:
        raise ValueError(f"The M_ctx input has no {sep!r}: it is not a get_inputs.py input.")
    return head, tail


def replace_context_input(task: str, mctx_input: str, context: str) -> str:
    """replace_context.py: the M_gen test input from the M_ctx input and the filtered context
    (`get_input_text_wow` for wow, `get_input_text_fever` for fever, `get_input_text` else).
    The question is right-stripped; the context is inserted as given."""
    prefix, text = _split_once(mctx_input, "\n\n")
    if task == "wow":
        prefix = prefix.replace("question", "query")
        prefix = prefix.replace("['query', 'context']", "['context', 'query']")
        prefix = prefix.replace("most helpful sentence", "response to the conversation")
        question, _ = _split_once(text, "context:")
        return "\n\n".join([prefix, f"context: {context}", question.rstrip()])
    if task == "fever":
        label = "judgement to the claim ('SUPPORTS' or 'REFUTES')"
        prefix = prefix.replace("['claim', 'context']", "['context', 'claim']")
        prefix = prefix.replace("most helpful sentence", label)
        prefix = prefix.replace("answer to the question", label)
        question, _ = _split_once(text, "context:")
    else:
        prefix = prefix.replace("['question', 'context']", "['context', 'question']")
        prefix = prefix.replace("most helpful sentence", "answer to the question")
        question, _ = _split_once(text, "\ncontext:")
    return f"{prefix}\n\ncontext: {context}\n{question.rstrip()}"
