"""How many corpus documents near-duplicate exclusion would remove against the held-out test
texts, per mini corpus (no LM): word 8-gram containment > 0.05 in the joined test texts.

    python scripts/neardup_corpus_stats.py     # writes results/ladder/neardup_corpus.md
"""
from __future__ import annotations

import logging

from ragrepro.io import atomic_write_text
from ragrepro.paths import results_dir
from ragrepro.retrieval.neardup import NearDupFilter

log = logging.getLogger("neardup_corpus_stats")


def stats(name: str, texts: list[str], passages: list, n: int = 8, threshold: float = 0.05):
    f = NearDupFilter(texts, n=n, threshold=threshold)
    f.keep([{"id": p.title, "text": p.text} for p in passages])
    top = sorted(f.removed.items(), key=lambda kv: -kv[1])
    return {"corpus": name, "documents": len(passages), "removed": len(f.removed), "top": top}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from ragrepro.data import foldoc, vital

    rows = [stats("wiki-vital", [d.text for d in vital.lm_docs("test")[:10]],
                  vital.corpus_passages()),
            stats("foldoc", [d.text for d in foldoc.lm_docs("test")], foldoc.corpus_passages())]
    out = [("# Near-duplicate exclusion against the 10 held-out test texts (word 8-grams, "
           "containment > 0.05)"), "", "`python scripts/neardup_corpus_stats.py`", "",
           "| Corpus | Documents | Removed | Most contained (title: containment) |",
           "|---|---|---|---|"]
    for r in rows:
        top = "; ".join(f"{t}: {c:.2f}" for t, c in r["top"][:8]) or "-"
        out.append(f"| {r['corpus']} | {r['documents']:,} | {r['removed']} | {top} |")
    md = "\n".join(out) + "\n"
    (results_dir() / "ladder").mkdir(parents=True, exist_ok=True)
    atomic_write_text(results_dir() / "ladder" / "neardup_corpus.md", md)
    log.info("\n%s", md)


if __name__ == "__main__":
    main()
