"""Sanity check of the RALM mechanism: give every window the evaluated article itself as its
document (a leak no real run may have) and compare word-level perplexity with no retrieval.

    python scripts/ralm_gold_doc_check.py --model smollm2-135m --limit 10

If the gold document does not lower perplexity sharply, document insertion is broken; if it
does while BM25 does not, the retrieval corpus lacks the text's information.
"""
from __future__ import annotations

import argparse
import logging
import math

log = logging.getLogger("ralm_gold_doc_check")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--stride", type=int, default=16)
    ap.add_argument("--doc-max-tokens", type=int, default=96)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from ragrepro.data.vital import lm_docs
    from ragrepro.named_configs import load_model
    from ralm.documents import doc_encoder
    from ralm.engine import StreamEval
    from ralm.settings import settings_from_defaults

    lm, _ = load_model(args.model, "float32", "auto")
    docs = lm_docs("test")[: args.limit]
    text = "".join(d.text for d in docs)
    ids = lm.encode(text)
    spans, pos = [], 0
    for d in docs:
        spans.append((pos, pos + len(d.text), d))
        pos += len(d.text)

    class Gold:
        def docs(self, text_index, windows, queries):
            out = []
            for w in windows:
                at = len(lm.decode(ids[:w.target_start]))
                d = next((d for a, b, d in spans if a <= at < b), spans[-1][2])
                body = d.text.split("\n\n", 1)[-1].strip()
                out.append([{"id": d.doc_id, "title": d.title, "text": body, "score": 1.0}])
            return out

    results = {}
    for mode in ("none", "first"):
        s = settings_from_defaults(
            {"max_length": args.max_length, "stride": args.stride,
             "retrieval_stride": args.stride, "query_len": 32,
             "doc_max_tokens": args.doc_max_tokens, "k": 1, "rerank": mode, "rerank_tokens": 16,
             "window_bos": bool(lm.add_bos)}, seed=0, batch_size=8, model_adds_bos=lm.add_bos)
        recs = StreamEval(lm, s, Gold(), doc_encoder(lm, args.doc_max_tokens, lm.add_bos),
                          bos_id=lm.bos_id).run(ids)
        results[mode] = math.exp(sum(r["nll_sum"] for r in recs) / text.count(" "))
    log.info("%s, %d articles: word-level perplexity without retrieval %.2f, with the gold "
             "article as the document %.2f", args.model, args.limit, results["none"],
             results["first"])


if __name__ == "__main__":
    main()
