"""Issue 29 item 4, the RICHES proposition rewrite in parts (riches/shard_jobs.py): parts
merged append the very lines one process writes to the proposition cache, so the RICHES run
generates nothing; a part killed mid-batch, or whose file was deleted, rewrites only what is
missing, in the batches one process uses. The fake LM's rewrite names the size of the batch
it was generated in and the sentence's place in it, so a part cut inside a batch, or a resumed
batch generated short, would change the lines."""
from __future__ import annotations

import pytest

from ragrepro.data.records import Passage
from ragrepro.errors import ConfigError
from riches import shard_jobs as sj
from riches.propositions import lm_propositions, rewrite_key, sentence_items

PROMPT = {"instruction": "Rewrite.", "examples": [], "item": "{title}: {sentence} ->"}
TITLES = [f"Town {i}" for i in range(9)]


def _passages() -> list[Passage]:
    out = []
    for i, t in enumerate(TITLES):
        sentences = [f"{t} is a town in the north." if j == 0 else f"It has {j} old bridges."
                     for j in range(2 + i % 3)]
        out.append(Passage(f"p{i}", t, " ".join(sentences)))
    out.append(Passage("p-dup", TITLES[0], out[0].text))  # same title and text: same sentences
    return out


class BatchLM:
    """Rewrites a sentence into a text naming its batch's size and its row in it."""

    name, revision, tokenizer = "batch-lm", "0", None

    def __init__(self, die_after: int | None = None) -> None:
        self.calls: list[int] = []
        self.die_after = die_after

    def encode(self, text: str) -> list[int]:
        return [len(text)]

    def generate(self, prompts, **kw) -> list[list[int]]:
        if self.die_after is not None and len(self.calls) == self.die_after:
            raise KeyboardInterrupt("killed")
        self.calls.append(len(prompts))
        return [[len(prompts), row, p[0]] for row, p in enumerate(prompts)]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        n, row, length = ids
        return f"A town of batch {n} row {row} length {length} is in the north.\nmore"


@pytest.fixture
def items():
    return sentence_items(_passages())


def _one_process(tmp_path):
    cache = tmp_path / "one" / "batch-lm.jsonl"
    facts = lm_propositions(BatchLM(), _passages(), PROMPT, cache, max_new_tokens=8)
    return cache.read_bytes(), facts


def _key() -> str:
    return rewrite_key(BatchLM(), PROMPT, 8)


def _part(items, cache, part, parts, lm=None):
    return sj.rewrite_part(lm or BatchLM(), items, PROMPT, cache, part, parts, 8)


def test_parts_merge_to_the_lines_one_process_writes(items, tmp_path):
    one, facts = _one_process(tmp_path)
    assert len(items) == 27 and len(one.splitlines()) == 27  # 4 batches, the last of 3
    cache = tmp_path / "sharded" / "batch-lm.jsonl"
    assert [_part(items, cache, i, 3)["batches"] for i in range(3)] == [2, 1, 1]
    assert not cache.exists()  # parts write only their own files
    assert sj.merge_rewrites(cache, items, _key()) == {"sentences": 27, "merged": 27}
    assert cache.read_bytes() == one
    lm = BatchLM()  # the RICHES run: every rewrite is cached, nothing is generated
    assert lm_propositions(lm, _passages(), PROMPT, cache, max_new_tokens=8) == facts
    assert lm.calls == []
    assert sj.merge_rewrites(cache, items, _key())["merged"] == 0  # a second merge adds none
    assert cache.read_bytes() == one


def test_part_killed_inside_a_batch_resumes_with_whole_batches(items, tmp_path):
    one, _ = _one_process(tmp_path)
    cache = tmp_path / "sharded" / "batch-lm.jsonl"
    lm = BatchLM(die_after=1)  # part 0/2 holds batches 0-1: killed before the second
    with pytest.raises(KeyboardInterrupt):
        _part(items, cache, 0, 2, lm)
    part = sj.part_path(cache, 0, 2)
    lines = part.read_text().splitlines()
    assert len(lines) == 8
    # the kill came inside the first batch's writes instead: 5 lines and a torn one
    part.write_text("\n".join(lines[:5]) + "\n" + lines[5][:17])
    lm = BatchLM()
    assert _part(items, cache, 0, 2, lm) == {"batches": 2, "rewritten_batches": 2,
                                             "sentences": 11}
    assert lm.calls == [8, 8]  # the broken batch generated whole again, not its 3 missing rows
    _part(items, cache, 1, 2)
    sj.merge_rewrites(cache, items, _key())
    assert cache.read_bytes() == one


def test_deleted_part_is_rewritten_alone(items, tmp_path):
    one, _ = _one_process(tmp_path)
    cache = tmp_path / "sharded" / "batch-lm.jsonl"
    for i in range(4):
        _part(items, cache, i, 4)
    sj.part_path(cache, 2, 4).unlink()
    with pytest.raises(ConfigError, match=r"sentence batches \[2\] of 4 .*overwrite=true"):
        sj.merge_rewrites(cache, items, _key())
    assert not cache.exists()
    lm = BatchLM()
    for i in range(4):
        _part(items, cache, i, 4, lm)
    assert lm.calls == [8]
    lm = BatchLM()  # parts of another count find the same batches
    _part(items, cache, 0, 2, lm)
    assert lm.calls == []
    sj.merge_rewrites(cache, items, _key())
    assert cache.read_bytes() == one


def test_merge_keeps_lines_of_other_settings_and_adds_only_missing(items, tmp_path):
    one, _ = _one_process(tmp_path)
    cache = tmp_path / "sharded" / "batch-lm.jsonl"
    cache.parent.mkdir(parents=True)
    other = '{"key": "other", "sentence_hash": "x", "pid": "p", "sentence": "s", "rewrite": "r"}\n'
    cache.write_text(other)
    for i in range(2):
        _part(items, cache, i, 2)
    sj.merge_rewrites(cache, items, _key())
    assert cache.read_bytes() == other.encode() + one


def test_the_job_needs_lm_proposition_keys():
    from riches.settings import KeySettings

    kc = KeySettings(name="sentence", unit="sentence", start="key", end="key", min_key_tokens=1,
                     start_at_word=True, evidence="key", max_new_tokens=8, demo="unit",
                     source="lm", paths=[], articles="sample", n_articles=3, seed=0,
                     generation_max_new_tokens=8, min_overlap=0.7)
    with pytest.raises(ConfigError, match="riches/keys@riches.key=proposition"):
        sj._lm_keys(kc)
