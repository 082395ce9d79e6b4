"""Check an official-format In-Context RALM retrieval file against a model's tokenizer, a text,
a stride and a max_length, without loading the model's weights.

    python scripts/ralm_check_retrieval_file.py FILE.json --text T.txt --model smollm2-135m \
        --stride 16 --max-length 256

Prints the window count and the documents per window, or the setting that differs (the same
check `retrieval.from_file=` runs before an evaluation).
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from ragrepro.errors import RagreproError
from ragrepro.named_configs import group_config

log = logging.getLogger("ralm_check_retrieval_file")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--text", required=True, help="the evaluated text (UTF-8 .txt)")
    ap.add_argument("--model", default="smollm2-135m", help="a conf/model/<name>.yaml")
    ap.add_argument("--stride", type=int, required=True)
    ap.add_argument("--max-length", type=int, required=True)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from transformers import AutoTokenizer

    from ragrepro.models.loading import resolve_source
    from ralm import official_format as off
    from ralm.windows import make_windows

    try:
        mcfg = group_config("model", args.model)
        path, _ = resolve_source(str(mcfg.source), str(mcfg.get("kind", "causal")))
        tok = AutoTokenizer.from_pretrained(path)
        ids = tok(Path(args.text).read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"]
        if mcfg.get("add_bos") and tok.bos_token_id is not None:
            ids = [tok.bos_token_id] + ids
        texts = off.read_file(args.file)
        wins = make_windows(len(ids), args.max_length, args.stride)
        off.check_windows(args.file, texts[0], wins, args.stride, args.max_length, len(ids))
    except RagreproError as e:
        log.error("%s", e)
        return 2
    n_docs = [len(off.docs_of(e)) for e in texts[0]]
    log.info("OK: %d windows match (%d tokens); documents per window: min %d, max %d",
             len(wins), len(ids), min(n_docs[1:] or [0]), max(n_docs or [0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
