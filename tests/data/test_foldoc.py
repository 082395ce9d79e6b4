"""FOLDOC converter on a tiny hand-written dictd fixture (index + gzip data)."""
import gzip

import pytest

from ragrepro.data import foldoc
from ragrepro.errors import ConfigError


def b64(n: int) -> str:
    out = ""
    while True:
        out = foldoc.B64[n % 64] + out
        n //= 64
        if n == 0:
            return out


LONG = " ".join(f"w{i}" for i in range(160))  # 160 words: a held-out candidate
RECORDS = [
    ("00-database-short", "00-database-short\n\n     The Free On-line Dictionary of Computing\n"),
    ("HTTP cookie", ("HTTP cookie\ncomputer cookie\n\n   <web> A small string sent by a {web\n"
                    "   server} to a {web browser} that is sent back by the browser each\n"
                    "   time it accesses that server again later on.\n\n   Invented by "
                    "{Netscape}.\n")),
    ("tiny", "tiny\n\n   Too short to keep.\n"),
] + [(f"long{j}", f"long{j}\n\n   {LONG}\n") for j in range(25)]


def write_fixture(tmp_path):
    data, lines, off = b"", [], 0
    for head, rec in RECORDS:
        raw = rec.encode()
        lines.append(f"{head}\t{b64(off)}\t{b64(len(raw))}")
        if head == "HTTP cookie":  # an alias headword pointing to the same record
            lines.append(f"computer cookie\t{b64(off)}\t{b64(len(raw))}")
        data += raw
        off += len(raw)
    (tmp_path / "foldoc.index").write_text("\n".join(lines) + "\n")
    with gzip.open(tmp_path / "foldoc.dict.dz", "wb") as f:
        f.write(data)
    return tmp_path


def test_b64_numbers_are_dictd_big_endian():
    assert (foldoc.b64_number("A"), foldoc.b64_number("BA"), foldoc.b64_number("K5")) == (
        0, 64, 10 * 64 + 57)


def test_clean_body_strips_link_braces_and_indentation():
    assert foldoc.clean_body("   a {web\n   server} b\n\n   {c}.\n") == "a web server b\n\nc."


def test_entries_dedupe_aliases_skip_metadata_and_short_ones(tmp_path):
    es = foldoc.load_entries(write_fixture(tmp_path))
    titles = [e.title for e in es]
    assert titles.count("HTTP cookie") == 1 and "tiny" not in titles
    assert not any(t.startswith("00-database") for t in titles) and len(es) == 26
    cookie = next(e for e in es if e.title == "HTTP cookie")
    assert cookie.aliases == ("computer cookie",)
    assert cookie.body.startswith("<web> A small string sent by a web server to a web browser")
    assert cookie.body.endswith("\n\nInvented by Netscape.")


def test_heldout_entries_never_in_the_corpus(tmp_path):
    d = write_fixture(tmp_path)
    test, dev = foldoc.lm_docs("test", d), foldoc.lm_docs("dev", d)
    assert len(test) == len(dev) == 10 and not {x.title for x in test} & {x.title for x in dev}
    corpus = {p.title for p in foldoc.corpus_passages(d)}
    assert len(corpus) == 26 - 20 and "HTTP cookie" in corpus
    assert not corpus & {x.title for x in test + dev}
    assert test[0].text == f"{test[0].title}\n\n{LONG}\n\n"
    with pytest.raises(ConfigError, match="dev and test"):
        foldoc.lm_docs("train", d)


def test_missing_files_say_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("FOLDOC_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match="make setup-foldoc"):
        foldoc.lm_docs("test")


def test_configs_compose_for_foldoc():
    from hydra import compose, initialize_config_dir

    from ragrepro.paths import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose(config_name="config", overrides=["experiment=ralm/table1_foldoc"])
    assert (cfg.dataset.name, cfg.corpus.name, cfg.ralm.near_dup) == ("foldoc", "foldoc", True)
