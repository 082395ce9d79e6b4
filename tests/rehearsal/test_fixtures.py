"""Hub-schema fixtures go through the real loaders and converters (only the location
differs), and the held-out dev split never reads the test split."""
import pytest

import ralm.profile
import riches.profile
from ragrepro import rehearsal
from ragrepro.data import hub
from ragrepro.data.catalog import dataset_config, load_named
from ragrepro.errors import DataError
from ragrepro.rehearsal.fixtures import (
    HUB,
    N_ROWS,
    dpr_passages,
    hub_file,
    load_fixture_rows,
    write_fixtures,
)

ARTICLES = [(f"Title{i}", " ".join(f"w{i}_{j}" for j in range(70)) + f". Second {i}. Third.")
            for i in range(60)]


@pytest.fixture()
def fixtures(tmp_path, monkeypatch):
    monkeypatch.delenv("RAGREPRO_DATA", raising=False)  # activate() points it at the fixtures
    root = tmp_path / "fx"
    write_fixtures(root, ARTICLES)  # with every registered method's own files
    riches.profile.write_fixtures(root, ARTICLES, N_ROWS, {"Title0": ["Title0 is a fixture."]})
    rehearsal.activate(root)
    yield root
    rehearsal.deactivate()


def test_every_hub_dataset_has_its_hub_split_names(fixtures):
    for repo, config, splits, _ in HUB:
        for split in splits:
            assert hub_file(fixtures, repo, config, split).exists()
    # the KILT test split and NQ-open's lack of one are as on the hub
    assert not hub_file(fixtures, "google-research-datasets/nq_open", "nq_open", "test").exists()


def test_nq_open_test_reads_validation_through_the_converter(fixtures):
    recs = load_named("nq-open", split="test", limit=2)
    # validation is the 2nd split: its rows start at article N_ROWS
    assert recs[0].question == f"what is title{N_ROWS}" and recs[0].answers == [f"Title{N_ROWS}"]
    assert recs[0].meta["hub_split"] == "validation"


def test_triviaqa_answers_are_value_then_aliases(fixtures):
    (r,) = load_named("triviaqa", split="test", limit=1)
    assert r.answers == [f"Title{N_ROWS}", f"title{N_ROWS}"] and r.qid == "tc_0"


def test_hotpotqa_nested_context_and_supporting_facts(fixtures):
    (r,) = load_named("hotpotqa", split="test", limit=1)
    assert r.gold_titles == [f"Title{N_ROWS}", f"Title{N_ROWS + 1}"]
    assert [p.title for p in r.passages] == r.gold_titles and r.hops == 2


@pytest.mark.parametrize("name,task,answer_start", [("fever", "fact", "SUPPORTS"),
                                                    ("eli5", "lfqa", "w6_0"),
                                                    ("wow", "dialog", "w6_0")])
def test_kilt_rows(fixtures, name, task, answer_start):
    (r,) = load_named(name, split="test", limit=1)
    assert r.task == task and r.answers[0].startswith(answer_start)
    assert r.gold_titles == [f"Title{N_ROWS}"]


def test_musique_decomposition_and_supporting_paragraphs(fixtures):
    (r,) = load_named("musique", split="test", limit=1)
    assert r.answers == [f"Title{N_ROWS + 1}"] and r.hops == 2
    assert r.gold_titles == [f"Title{N_ROWS}", f"Title{N_ROWS + 1}"]


def test_wikitext_rows_join_as_eval_lm_does(fixtures):
    (doc,) = load_named("wikitext-103", split="test")
    assert doc.text.startswith(f" \n = Title{2 * N_ROWS} = \n \n w{2 * N_ROWS}_0 ")


def test_dpr_files_and_pile_jsonl(fixtures):
    recs = load_named("nq-open-dpr", split="test", path=str(fixtures / "dpr" / "nq-test.json"),
                      limit=2)
    assert recs[0].passages[0].title == "Title0" and recs[0].meta["ctx_has_answer"][0]
    docs = load_named("realnews", path=str(fixtures / "pile" / "realnews.jsonl"))
    assert len(docs) == N_ROWS and docs[0].text == ARTICLES[0][1]


def test_dpr_tsv_passages_are_100_words():
    ps = dpr_passages([("A", " ".join(["x"] * 250))])
    assert [len(p["text"].split()) for p in ps] == [100, 100, 50] and ps[2]["id"] == "3"


def test_factoid_wiki_carries_demo_propositions(fixtures):
    rows = load_fixture_rows(fixtures / "riches" / "factoid-wiki.jsonl")
    # split on ". " then a period added: the last sentence keeps its own too ("Third..", a
    # quirk of the v5 fixture tree, kept so that tree stays byte-identical)
    assert rows[0] == {"title": "Title0", "propositions": [
        " ".join(f"w0_{j}" for j in range(70)) + ".", "Second 0.", "Third..",
        "Title0 is a fixture."]}


def test_each_method_writes_its_own_fixtures(tmp_path):
    """The core writes no method's files; each profile's hook does (ralm, riches)."""
    write_fixtures(tmp_path / "core", ARTICLES, profiles=())
    assert not (tmp_path / "core" / "ralm").exists()
    assert not (tmp_path / "core" / "riches").exists()
    ralm.profile.write_fixtures(tmp_path, ARTICLES, 2)
    assert (tmp_path / "ralm" / "wikitext103_forbidden_titles.txt").read_text() == \
        '"Title2"\n"Title3"\n"Title4"\n'
    titles = riches.profile.fixture_titles()
    assert titles and all(riches.profile.demo_propositions()[t] is not None for t in titles)


# ---- dev is not test (issue 14/13): held-out part of train -------------------------------
def test_dev_is_held_out_train_never_validation(fixtures):
    dev = load_named("nq-open", split="dev")
    train = load_named("nq-open", split="train")
    rest = load_named("nq-open", split="train-nodev")
    test = load_named("nq-open", split="test")
    dev_q = {r.question for r in dev}
    assert dev_q and dev_q <= {r.question for r in train}
    assert not dev_q & {r.question for r in test}
    assert not dev_q & {r.question for r in rest}
    assert len(dev) + len(rest) == len(train)
    assert dev[0].meta["hub_split"].startswith("train (held-out dev")


HELDOUT = hub.HeldoutDev(every=10, seed="ragrepro-dev-v1")


def test_heldout_dev_is_a_stable_tenth():
    part = hub.dev_partition(10_000, "dev", HELDOUT)
    assert 900 < len(part) < 1100
    assert part == hub.dev_partition(10_000, "dev", HELDOUT)
    assert set(part).isdisjoint(hub.dev_partition(10_000, "train-nodev", HELDOUT))
    assert hub.dev_partition(10, "test", HELDOUT) is None


def _split_source(name: str, split: str, path: str | None = None) -> str | None:
    node = dataset_config(name)
    node.split, node.path = split, path
    return hub.split_source_of(node)


def test_rows_record_where_the_split_came_from():
    assert _split_source("nq-open", "test") == "validation"
    assert _split_source("fever", "dev").startswith("train (held-out dev")
    assert _split_source("vital-qa", "dev") is None
    assert _split_source("musique", "test", path="/x.jsonl") is None
    assert _split_source("wikitext-103", "dev") is None  # rows never recorded it


def test_a_split_the_hub_lacks_is_a_clear_error(fixtures):
    with pytest.raises(DataError, match="does not exist on the hub"):
        hub.load_hub_split("google-research-datasets/nq_open", "nq_open", "nosuch", "x",
                           split_map={}, heldout=None)
