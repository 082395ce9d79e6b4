"""RICHES decoding over a question set (§3): the key index and constraint, the few-shot
prompt as token ids, the adaptive beam search per question, and what each generation's keys
point to. The no-retrieval ablation runs the same code with the constraint disabled."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from ragrepro import generation
from ragrepro.data.records import QARecord
from ragrepro.models.lm import LM
from ragrepro.tracking import Run

from . import markers
from .beam import BeamConfig, BeamStats, HFStepModel, beam_search
from .budgets import check_decoding
from .constraint import KeyConstraint, key_token_ids, marker_spec
from .inputs import QA_PROMPTS, Inputs
from .key_index import build_index, build_key_corpus, check_demo_keys
from .keys import KeyCorpus, document_frequencies, tfidf_rank
from .prompts import RichesPrompt, parse_answer
from .records import sample_record
from .settings import RichesSettings


@dataclass
class KeyHit:
    text: str
    closed: bool
    n_matches: int
    verbatim: bool
    doc_indices: list[int]


def analyse_keys(tokens: list[int], constraint: KeyConstraint, kcorp: KeyCorpus,
                 decode: Callable[[Sequence[int]], str], at_key_start: bool) -> list[KeyHit]:
    """Every key span of a generation: its text, whether the index and the corpus text both
    contain it verbatim, and the documents it points to."""
    out = []
    for s, e, closed in markers.spans(constraint.spec, tokens):
        ids = tokens[s:e]
        text = decode(ids).strip()
        index = constraint.index
        span = index.find(ids, at_key_start)
        n = 0 if span is None else span.count
        docs: list[int] = []
        in_text = False
        if n:
            hits = index.locate(span, max_hits=50)
            docs = list(dict.fromkeys(d for _, d, _ in hits))
            in_text = any(text in kcorp.keys[k] for k, _, _ in hits)
        out.append(KeyHit(text, closed, n, bool(n and in_text and text), docs))
    return out


def evidence_text(hits: list[KeyHit], kcorp: KeyCorpus, mode: str, question: str,
                  df: Counter) -> tuple[str, list[str]]:
    """The AutoAIS premise (concatenated keys, §5.2) and the titles the keys point to."""
    titles: list[str] = []
    parts: list[str] = []
    for h in hits:
        cand = h.doc_indices
        if mode == "document" and cand:
            order = tfidf_rank(question, [kcorp.docs[i].text for i in cand], df, len(kcorp.docs))
            best = kcorp.docs[cand[order[0]]]
            parts.append(f"{best.title}. {best.text}")
            titles.append(best.title)
        else:
            if h.text:
                parts.append(h.text)
            titles.extend(dict.fromkeys(kcorp.docs[i].title for i in cand[:1]))
    return " ".join(parts), titles


@dataclass(frozen=True)
class Decoder:
    """Everything one RICHES answer needs, built once per run."""

    lm: LM
    kcorp: KeyCorpus
    constraint: KeyConstraint
    prompt: RichesPrompt
    beam: BeamConfig
    evidence: str          # key | document (the AutoAIS premise)
    at_start: bool
    df: Counter
    step_model: HFStepModel


def build_prompt(inputs: Inputs, s: RichesSettings) -> RichesPrompt:
    lm, kc = inputs.lm, s.key
    spec = marker_spec(lm.tokenizer, s.markers.open, s.markers.close)
    return RichesPrompt(inputs.prompt, kc.unit, s.thoughts,
                        encode=lambda t: lm.encode(t, add_bos=False),
                        key_ids=lambda t: key_token_ids(lm.tokenizer, [t])[0],
                        open_ids=spec.open, close_ids=spec.close,
                        corpus_text=inputs.corpus_text, bos=lm.bos_id if lm.add_bos else None,
                        demo=kc.demo)


def build_decoder(inputs: Inputs, s: RichesSettings, corpus_name: str, constrained: bool,
                  uncapped: Mapping[str, Any] | None = None) -> tuple[Decoder, dict[str, Any]]:
    """The decoder and its row settings (key type, beam, index size and provenance). The
    budget is checked against the prompt first, before any index or proposition is built."""
    lm, kc = inputs.lm, s.key
    prompt = build_prompt(inputs, s)
    budget_needed = check_decoding(s, prompt, lm, uncapped)
    # all demonstration propositions go into the index, so one index serves both prompts;
    # the shipped prompts come first, so the key order (and keys_hash) is the same whichever
    # prompt this run uses (a custom prompt's extra propositions come last)
    shipped = [s.prompts[n] for n in QA_PROMPTS] + [inputs.prompt]
    kcorp, origin = build_key_corpus(kc, inputs.docs, lm, shipped, s.prompts["propositions"])
    index = build_index(kcorp, lm, corpus_name, kc, s.index_shard_tokens)
    constraint = KeyConstraint.for_tokenizer(
        index, lm.tokenizer, s.markers.open, s.markers.close, start=kc.start, end=kc.end,
        min_key_tokens=kc.min_key_tokens, start_at_word=kc.start_at_word, enabled=constrained)
    at_start = kc.start == "key"
    check_demo_keys(prompt, index, at_start, kc.end == "key")
    max_new = s.max_new_tokens or kc.max_new_tokens
    beam = BeamConfig(beam_size=s.beam_size, adaptive=s.adaptive, max_new_tokens=max_new,
                      renormalize=s.renormalize, length_penalty=s.length_penalty,
                      stop_strings=tuple(inputs.prompt["stop"]),
                      answer_prefix=inputs.prompt["answer_prefix"]
                      if inputs.prompt.get("answer_ends_output") else None)
    evidence = kc.evidence if constrained else "key"
    decoder = Decoder(lm, kcorp, constraint, prompt, beam, evidence, at_start,
                      document_frequencies(kcorp.docs), HFStepModel(lm.model, lm.device))
    return decoder, {
        "key_type": kc.name, "key_start": kc.start, "key_demo": kc.demo, "key_end": kc.end,
        "min_key_tokens": kc.min_key_tokens, "beam_size": s.beam_size, "adaptive": s.adaptive,
        "thoughts": s.thoughts, "renormalize": s.renormalize, "length_penalty": s.length_penalty,
        "max_new_tokens": max_new, "max_new_tokens_needed": budget_needed,
        "n_index_keys": len(kcorp.keys), "index_tokens": index.n,
        "index_bytes_per_token": index.bytes_per_token(), "evidence": evidence, **origin}


def answer_one(d: Decoder, run: Run, rec: QARecord) -> dict[str, Any]:
    """Decode one question and return its sample record."""
    lm = d.lm
    t0 = time.perf_counter()
    ids, shared = d.prompt.build(rec.question)
    stats = BeamStats()
    eos = [t for t in {lm.eos_id} if t is not None]
    with run.timed("decode"):
        hyps = beam_search(d.step_model, ids, d.constraint, d.beam, lm.decode, eos, stats, shared)
    best = hyps[0]
    gen = [t for t in best.tokens if t not in eos]
    text = lm.decode(gen)
    hits = analyse_keys(gen, d.constraint, d.kcorp, lm.decode, d.at_start)
    evidence, titles = evidence_text(hits, d.kcorp, d.evidence, rec.question, d.df)
    answer = parse_answer(text, d.prompt.cfg["answer_prefix"])
    diag = key_diag(hits)
    return sample_record(rec, answer, evidence, titles, {
        "output": text, "finish": best.reason, "score": best.score,
        "keys": [h.__dict__ for h in hits], "n_keys": diag["keys_closed"],
        "keys_verbatim": diag["keys_verbatim"], "beam_steps": stats.steps,
        "max_live": stats.max_live, "seconds": time.perf_counter() - t0,
        # the beam knows why its best hypothesis ended: eos | stop | length
        "generation": {"answer": generation.record(best.reason, len(ids), len(best.tokens),
                                                   prediction=answer)},
        "diag": diag})


def key_diag(hits: Sequence[KeyHit]) -> dict[str, int]:
    """Keys opened, closed and verbatim in one generation. Only closed keys count as
    retrieved (keys_per_answer, the dense reader's k: auto): an unclosed key is a generation
    cut off inside its evidence."""
    return {"keys_opened": len(hits), "keys_closed": sum(h.closed for h in hits),
            "keys_verbatim": sum(h.verbatim for h in hits)}


def run_decoding(run: Run, inputs: Inputs, settings: RichesSettings, corpus_name: str,
                 method: str, uncapped: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Answer every unfinished question; returns the row settings."""
    decoder, row = build_decoder(inputs, settings, corpus_name, constrained=method == "riches",
                                 uncapped=uncapped)
    for rec in tqdm(inputs.todo, desc=f"riches:{method}"):
        run.add_sample(answer_one(decoder, run, rec))
    return row
