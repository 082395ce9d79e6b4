"""RICHES constrained vs unconstrained beam decoding speed (part of `make bench` section
`riches`): the same prompt and model, with and without the corpus constraint, so the
difference is the constraint's own cost."""
from __future__ import annotations

import time

import numpy as np

from .common import load_lm, markdown_table


def decoding(n_tokens: int = 1_000_000, beam: int = 4, steps: int = 32) -> list[dict]:
    """Constrained vs unconstrained beam decoding tokens/s with the same prompt and model."""
    from riches.beam import BeamConfig, BeamStats, HFStepModel, beam_search
    from riches.constraint import KeyConstraint, vocab_size_of
    from riches.index import SuffixIndex

    from .riches_index import wiki_vital_keys

    lm = load_lm("smollm2-135m")
    keys = wiki_vital_keys(n_tokens, tokenizer=lm.tokenizer)
    index = SuffixIndex.build([np.asarray(k) for k in keys], vocab_size_of(lm.tokenizer))
    prompt = lm.encode("Question: Where does the Amazon River flow?\nEvidence:")
    out = []
    for mode, enabled in (("constrained", True), ("unconstrained", False)):
        c = KeyConstraint.for_tokenizer(index, lm.tokenizer, enabled=enabled)
        state = c.initial()
        for t in c.spec.open:  # the prompt ends in the open marker
            state = c.advance(state, t)
        ids = prompt + list(c.spec.open)
        # adaptive=False: free text also keeps `beam` hypotheses, so both modes do the same
        # model work and the difference is the constraint's own cost
        cfg = BeamConfig(beam_size=beam, adaptive=False, max_new_tokens=steps, stop_strings=())
        best = float("inf")
        for _ in range(2):
            stats = BeamStats()
            t0 = time.perf_counter()
            beam_search(HFStepModel(lm.model), ids, c, cfg, lm.decode, (), stats,
                        start_state=state)
            best = min(best, time.perf_counter() - t0)
        out.append({"mode": mode, "index_tokens": index.n, "beam": beam, "steps": stats.steps,
                    "max_live": stats.max_live, "tokens_per_s": stats.steps / best,
                    "hyp_tokens_per_s": sum(stats.expansions) / best, "s": best})
    return out


def summary_lines(dec: list[dict]) -> list[str]:
    """The decoding paragraph and table of the `riches` section of results/bench/README.md."""
    out = [("Decoding, smollm2-135m, beam 4 (non-adaptive, so both modes keep 4 live "
            "hypotheses), 32 new tokens, index of ~1M wiki-vital tokens; the prompt ends in "
            "the open marker so every hypothesis starts inside a key. tokens/s = output "
            "tokens per second; candidates/s = proposals scored per second:"), "",
           *markdown_table([{"mode": r["mode"], "index tokens": r["index_tokens"],
                             "steps": r["steps"], "live": r["max_live"],
                             "tokens/s": r["tokens_per_s"],
                             "candidates/s": r["hyp_tokens_per_s"], "s": r["s"]}
                            for r in dec])]
    if len(dec) == 2:
        out.append(f"\nConstrained / unconstrained decoding speed: "
                   f"{dec[0]['tokens_per_s'] / dec[1]['tokens_per_s']:.2f}")
    return out
