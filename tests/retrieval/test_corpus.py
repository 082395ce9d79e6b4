from __future__ import annotations

import pytest

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError, DataError
from ragrepro.retrieval.corpus import (
    Corpus,
    chunk_words,
    content_fingerprint,
    load_corpus,
    read_dpr_tsv,
)


def _words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


def test_chunking_250_words_gives_100_100_50():
    chunks = chunk_words(Passage("p", "T", _words(250)), 100)
    assert [len(c.text.split()) for c in chunks] == [100, 100, 50]
    assert [c.pid for c in chunks] == ["p#0", "p#1", "p#2"]
    assert all(c.title == "T" for c in chunks)
    assert chunks[1].text.split()[0] == "w100" and chunks[2].text.split()[-1] == "w249"


def test_chunking_exact_multiple_and_short_passage():
    assert [len(c.text.split()) for c in chunk_words(Passage("p", "T", _words(200)), 100)] == [100, 100]
    only = chunk_words(Passage("p", "T", _words(7)), 100)
    assert len(only) == 1 and only[0].text == _words(7)


def test_chunking_joins_line_breaks_with_single_spaces():
    [c] = chunk_words(Passage("p", "T", "first line\nsecond  line\n\nthird"), 100)
    assert c.text == "first line second line third"


def test_chunking_rejects_bad_sizes_and_empty_text():
    with pytest.raises(DataError):
        chunk_words(Passage("p", "T", "a b"), 0)
    with pytest.raises(DataError, match="'empty-1'"):
        chunk_words(Passage("empty-1", "T", "   "), 100)


def test_empty_passage_raises_data_error_naming_the_pid():
    with pytest.raises(DataError, match="'x-2'"):
        Corpus("c", [Passage("x-1", "A", "text"), Passage("x-2", "B", "")])


def test_duplicate_pids_are_rejected():
    with pytest.raises(DataError, match="twice"):
        Corpus("c", [Passage("x", "A", "one"), Passage("x", "B", "two")])


def test_fingerprint_depends_on_content():
    a = [Passage("1", "A", "alpha"), Passage("2", "B", "beta")]
    b = [Passage("1", "A", "alpha"), Passage("2", "B", "beta!")]
    assert content_fingerprint(a) == content_fingerprint(list(a))
    assert content_fingerprint(a) != content_fingerprint(b)
    assert Corpus("c", a).fingerprint() != Corpus("c", b).fingerprint()


def test_wiki_vital_loads_with_multiline_texts(vital):
    assert len(vital) == 9828
    multiline = [p for p in vital if "\n" in p.text]
    assert len(multiline) > 200  # the vital leads with internal line breaks are kept intact
    p = vital.by_pid(multiline[0].pid)
    assert p == multiline[0]
    with pytest.raises(DataError, match="not in corpus"):
        vital.by_pid("nope")


def test_wiki_vital_chunked_and_excluded(vital):
    chunked = load_corpus("wiki-vital", chunk_words=100)
    words = sum(len(p.text.split()) for p in vital)
    assert sum(len(p.text.split()) for p in chunked) == words
    assert len(chunked) >= len(vital)
    assert chunked.fingerprint() != vital.fingerprint()
    fewer = load_corpus("wiki-vital", exclude_titles=["Carmen", "Paris"])
    assert len(fewer) == len(vital) - 2
    assert not any(p.title in ("Carmen", "Paris") for p in fewer)


def test_wikipedia_dpr_without_path_fails_only_when_read():
    c = load_corpus("wikipedia-dpr", path=None)
    assert c.fingerprint()  # keying a cache does not need the file
    with pytest.raises(DataError, match="psgs_w100.tsv"):
        len(c)


def test_wikipedia_dpr_reads_a_dpr_tsv(tmp_path):
    path = tmp_path / "psgs.tsv"
    path.write_text('id\ttext\ttitle\n1\t"Aaron is a prophet"\tAaron\n2\tSecond text\tB\n',
                    encoding="utf-8")
    c = load_corpus("wikipedia-dpr", path=str(path))
    assert [(p.pid, p.title, p.text) for p in c] == [("1", "Aaron", "Aaron is a prophet"),
                                                    ("2", "B", "Second text")]
    bad = tmp_path / "bad.tsv"
    bad.write_text("pid\tbody\n1\tx\n", encoding="utf-8")
    with pytest.raises(DataError, match="header"):
        read_dpr_tsv(bad)


def test_unknown_corpus_name():
    with pytest.raises(ConfigError, match="wiki-vital"):
        load_corpus("wiki-vitl")


def test_file_corpus_fingerprint_does_not_depend_on_loading(tmp_path):
    path = tmp_path / "psgs.tsv"
    path.write_text("id\ttext\ttitle\n1\tsome text\tT\n", encoding="utf-8")
    before = load_corpus("wikipedia-dpr", path=str(path)).fingerprint()
    loaded = load_corpus("wikipedia-dpr", path=str(path))
    len(loaded)
    assert loaded.fingerprint() == before
    assert load_corpus("wikipedia-dpr", path=str(path), chunk_words=50).fingerprint() != before
