"""Attestation: one string per run that says whether two runs produced the same per-sample
outputs, so two machines compare 16 characters instead of diffing samples.jsonl.

    ragrepro attest <experiment> [--run PREFIX ...] [--check FILE_OR_STRING]
    (the command: ragrepro/report/attest_cli.py; this module is the hash, below the readers)

What is hashed: the run's samples.jsonl, record by record. Each record is a sample's
identity and its outputs, and every field of it counts except the VOLATILE_FIELDS (wall time,
which differs between two runs of the same outputs). Per record type:

  RALM perplexity window   identity `text`, `window`; outputs `nll_sum`, `n_scored`, the
                           window's bounds, its query and the document it was conditioned on
                           (`doc_pid`, `doc_title`, `doc_rank`, `doc_score`, `rerank_score`)
                           and its `diag` facts.
  QA question (RALM QA,    identity `qid` (FilCo also `setting`); outputs the generated text
  RICHES, FilCo)           (`output` / `raw_output`), the parsed `prediction`, the evidence or
                           context, the `generation` and `diag` mappings and the per-sample
                           scores; the inputs a record carries (question, answers, prompt) are
                           hashed too, so the same string also means the same inputs.

The attestation is sha256 over the sorted list of the records' own sha256 digests (each of
the record's canonical JSON), cut to ATTESTATION_LENGTH hex characters: the order in which a
run wrote its records (a resumed run, a sharded sweep) does not change it; any change to any
output does. Canonical JSON sorts keys and writes numbers by value: a float that holds an
integer is written as that integer (1.0 as 1, -0.0 as 0) and any other float in its shortest
round-trip form, so a run re-read from its JSON files hashes exactly as it did when written.

Float noise changes it, on purpose: the attestation answers "did we get the same outputs?",
and an NLL that differs in the 15th digit is a different output (the tables' rounding, not the
attestation, says whether it matters: docs/reliability.md). A tolerance would make two
strings equal for outputs that differ, and no longer comparable by eye.

Every run records its attestation in metrics.json (`metadata.attestation`) and in its CSV row
(column `attestation`) when it is finalised (ragrepro.tracking.Run.write_results); a run from
before has it computed from its samples on the fly here, by `ragrepro samples` and by
`ragrepro attest`, which also checks a recorded one against the samples.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .run_files import read_records

log = logging.getLogger(__name__)

SAMPLES_FILE = "samples.jsonl"
ATTESTATION_LENGTH = 16
# Part of every hash: a change of the rules above gets a new scheme and other strings.
SCHEME = "ragrepro-attestation-1"
# Fields that measure how long a sample took, not what it produced.
VOLATILE_FIELDS = frozenset({"seconds"})
ATTESTATION = re.compile(rf"^[0-9a-f]{{{ATTESTATION_LENGTH}}}$")
# Integers beyond this are not exact as floats: a float this large keeps its float form.
_EXACT_INT = 2 ** 53


# -- the hash (pure) ------------------------------------------------------------------------
def canonical(value: Any) -> Any:
    """`value` with every float written by value: integral finite floats as ints (so 1.0 and
    1 agree, as the JSON of two writers may spell them), others unchanged (JSON writes their
    shortest round-trip form; NaN and infinities as JSON's own tokens)."""
    if isinstance(value, bool) or value is None or isinstance(value, (str, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < _EXACT_INT:
            return int(value)
        return value
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return str(value)  # what json.dumps(default=str) would have written


def record_digest(record: Mapping[str, Any]) -> str:
    """sha256 (hex) of one record's canonical JSON without its VOLATILE_FIELDS."""
    kept = {k: v for k, v in record.items() if k not in VOLATILE_FIELDS}
    text = json.dumps(canonical(kept), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def attestation(records: Iterable[Mapping[str, Any]]) -> str:
    """The order-independent hash of a run's records (see the module docstring)."""
    h = hashlib.sha256(SCHEME.encode("utf-8"))
    for digest in sorted(record_digest(r) for r in records):
        h.update(digest.encode("ascii") + b"\n")
    return h.hexdigest()[:ATTESTATION_LENGTH]


def samples_attestation(samples_path: Path) -> str | None:
    """The attestation of a samples.jsonl file; None when the run wrote none. A damaged
    line raises the DataError of ragrepro.run_files naming it."""
    path = Path(samples_path)
    if not path.exists():
        return None
    return attestation(read_records(path, finished=True))


# -- a run's attestation: recorded, or computed for older runs ------------------------------
@dataclass(frozen=True)
class Attested:
    """A run's attestation: computed from its samples now, and the one it recorded (None
    for runs finished before runs recorded one)."""

    computed: str | None
    recorded: str | None

    @property
    def value(self) -> str | None:
        return self.computed if self.computed is not None else self.recorded

    @property
    def mismatch(self) -> bool:
        """The samples no longer hash to what the run recorded: changed after it finished."""
        return self.recorded is not None and self.computed != self.recorded

    def shown(self) -> str:
        return self.value or "-"


def recorded_attestation(metrics_json: Mapping[str, Any]) -> str | None:
    value = (metrics_json.get("metadata") or {}).get("attestation")
    return str(value) if value else None


def of_run(run_dir: Path | None, metrics_json: Mapping[str, Any] | None = None) -> Attested:
    """The attestation of a finished run folder, computed from its samples.jsonl, next to
    the one its metrics.json records."""
    computed = samples_attestation(Path(run_dir) / SAMPLES_FILE) if run_dir else None
    return Attested(computed, recorded_attestation(metrics_json or {}))
