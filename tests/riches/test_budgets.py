"""Budgets that fit (issue 22): every RICHES generation budget holds the longest output its
prompt's demonstrations show, checked at start with the run's tokenizer; the rehearsal's cap
does not hide the configured value; only closed keys count as retrieved."""
from __future__ import annotations

import dataclasses
import itertools
from functools import cache

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf
from riches_fakes import riches_config, shipped_prompt

from ragrepro.configcheck import option_file
from ragrepro.errors import ConfigError
from ragrepro.generation import record
from ragrepro.paths import CONF_DIR
from riches.baselines import iterative_diagnostics, line_finish
from riches.budgets import (
    check_decoding,
    check_iterative,
    check_reader,
    decode_budget,
    iterative_outputs,
    reader_outputs,
)
from riches.constraint import key_token_ids, marker_spec
from riches.decoding import KeyHit, key_diag
from riches.prompts import RichesPrompt
from riches.records import sample_metrics
from riches.settings import RichesSettings


class TokLM:
    """The two LM methods the checks use, from a real tokenizer (no weights)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str, add_bos: bool = False) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids))


@cache
def tok_lm(source: str) -> TokLM:
    from ragrepro.models.loading import resolve_source

    return tok_lm_at(resolve_source(source)[0])


@cache
def tok_lm_at(path: str) -> TokLM:
    from transformers import AutoTokenizer

    return TokLM(AutoTokenizer.from_pretrained(path))


@cache
def corpus_text() -> dict[str, str]:
    from ragrepro.data.vital import corpus_passages

    out: dict[str, str] = {}
    for p in corpus_passages():
        out.setdefault(p.title, p.text)
    return out


def settings(*overrides: str) -> RichesSettings:
    return instantiate(riches_config(*overrides).riches, _convert_="object")


def prompt_for(s: RichesSettings, name: str, lm: TokLM) -> RichesPrompt:
    spec = marker_spec(lm.tokenizer, s.markers.open, s.markers.close)
    return RichesPrompt(shipped_prompt(name), s.key.unit, s.thoughts, lm.encode,
                        lambda t: key_token_ids(lm.tokenizer, [t])[0], spec.open, spec.close,
                        corpus_text(), demo=s.key.demo)


@pytest.mark.slow  # a real embedded model
def test_the_old_sentence_budget_is_refused_for_multi_hop_with_the_needed_value() -> None:
    lm = tok_lm("embedded:smollm2")
    s = settings("riches/keys@riches.key=sentence")
    old = dataclasses.replace(s, key=dataclasses.replace(s.key, max_new_tokens=96))
    prompt = prompt_for(old, "multi_hop", lm)
    # the longest demonstration output, counted by hand from its parts (thought, evidence,
    # open marker, key, close marker, line end for each step; then the answer line)
    by_hand = max(sum(len(lm.encode(f"Keywords: {st['thought']}\n")) + len(lm.encode("Evidence:"))
                      + 1 + len(key_token_ids(lm.tokenizer, [st["sentence"]])[0]) + 1
                      + len(lm.encode("\n")) for st in ex["steps"])
                  + len(lm.encode(f"Answer: {ex['answer']}\n\n"))
                  for ex in shipped_prompt("multi_hop")["examples"])
    assert by_hand == 116
    with pytest.raises(ConfigError, match=r"riches\.key\.max_new_tokens=96 .*116 tokens.*"
                                          r"Set riches\.key\.max_new_tokens=116"):
        check_decoding(old, prompt, lm, None)
    assert check_decoding(s, prompt, lm, None) == 116  # the shipped 160 holds it
    top = dataclasses.replace(s, max_new_tokens=100)     # riches.max_new_tokens wins
    with pytest.raises(ConfigError, match=r"riches\.max_new_tokens=100 "):
        check_decoding(top, prompt, lm, None)


@pytest.mark.slow  # a real embedded model
def test_the_rehearsal_cap_is_not_checked_but_the_configured_budget_is() -> None:
    lm = tok_lm("embedded:smollm2")
    s = dataclasses.replace(settings("riches/keys@riches.key=sentence"), max_new_tokens=16)
    prompt = prompt_for(s, "multi_hop", lm)
    with pytest.raises(ConfigError, match=r"riches\.max_new_tokens=16 "):
        check_decoding(s, prompt, lm, None)                 # a real run with 16: refused
    # the rehearsal capped a null riches.max_new_tokens to 16: the key type's 160 is checked
    assert decode_budget(s, {"riches.max_new_tokens": None}) == ("riches.key.max_new_tokens", 160)
    assert check_decoding(s, prompt, lm, {"riches.max_new_tokens": None}) == 116
    with pytest.raises(ConfigError, match=r"riches\.max_new_tokens=50 "):
        check_decoding(s, prompt, lm, {"riches.max_new_tokens": 50})


def _sweep(experiment: str) -> list[tuple[str, ...]]:
    """Every (key type, hops) override pair of a mini experiment's sweep."""
    cfg = OmegaConf.load(option_file("experiment", experiment))
    params = OmegaConf.select(cfg, "hydra.sweeper.params") or {}
    keys = str(params.get("riches/keys@riches.key", "")).split(",") if \
        "riches/keys@riches.key" in params else [None]
    hops = str(params["dataset.hops"]).split(",") if "dataset.hops" in params else \
        [str(OmegaConf.select(cfg, "dataset.hops"))]
    return [tuple(o for o in (f"riches/keys@riches.key={k}" if k else None,
                              f"dataset.hops={h}") if o)
            for k, h in itertools.product(keys, hops)]


@cache
def compose_experiment(experiment: str, *overrides: str):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(str(CONF_DIR), version_base=None):
        return compose("config", overrides=[f"experiment={experiment}", *overrides])


MINI = ["riches/keys", "riches/beam", "riches/interleave", "riches/main", "riches/main_ladder"]


@pytest.mark.slow  # a real embedded model
@pytest.mark.parametrize("source", ["embedded:smollm2", "embedded:gemma3"])
@pytest.mark.parametrize("experiment", MINI)
def test_every_mini_budget_holds_its_demonstrations(experiment: str, source: str) -> None:
    lm = tok_lm(source)
    for overrides in _sweep(experiment):
        cfg = compose_experiment(experiment, *overrides)
        s = instantiate(cfg.riches, _convert_="object")
        name = "multi_hop" if int(cfg.dataset.hops) > 1 else "single_hop"
        check_decoding(s, prompt_for(s, name, lm), lm, None)
        check_reader(s, shipped_prompt(name), lm, None)
        check_iterative(s, shipped_prompt(name), lm, None)


def test_baseline_outputs_are_what_their_demonstrations_show() -> None:
    cfg = {"examples": [{"answer": "Paris", "steps": [{"subquestion": "Which city?"},
                                                      {"subquestion": "Which river?"}]}]}
    assert reader_outputs(cfg) == [" Paris\n"]
    assert iterative_outputs(cfg) == ["Follow-up: Which city?\n", "Follow-up: Which river?\n",
                                      "Answer: Paris\n"]


def test_only_closed_keys_count_as_retrieved() -> None:
    hits = [KeyHit("a", True, 1, True, [0]), KeyHit("b", True, 0, False, []),
            KeyHit("c d", False, 2, True, [1])]  # the last one was cut off by the budget
    assert key_diag(hits) == {"keys_opened": 3, "keys_closed": 2, "keys_verbatim": 2}
    samples = [{"f1_squad": 0.0, "em_squad": 0.0, "n_keys": 2, "keys_verbatim": 2,
                "gold_title_recall": None, "seconds": 1.0, "diag": key_diag(hits),
                "generation": {"answer": record("length", 50, 96, prediction="")}},
               {"f1_squad": 1.0, "em_squad": 1.0, "n_keys": 1, "keys_verbatim": 1,
                "gold_title_recall": None, "seconds": 1.0,
                "diag": {"keys_opened": 1, "keys_closed": 1, "keys_verbatim": 1},
                "generation": {"answer": record("stop", 50, 30, prediction="Paris")}}]
    m = sample_metrics(samples, decoded_keys=True)
    assert m["keys_per_answer"] == 1.5                 # (2 + 1) closed / 2, not (3 + 1) / 2
    assert m["verbatim_rate"] == pytest.approx(3 / 4)  # verbatim over opened keys
    assert m["diag_keys_opened"] == 2 and m["diag_keys_closed"] == 1.5
    assert m["gen_answer_length"] == 0.5 and m["gen_answer_empty"] == 0.5
    assert m["gen_answer_output_tokens"] == 63


def test_baseline_finish_reasons() -> None:
    assert line_finish("length", " Paris\nQuestion: Who") == "stop"  # the answer line ended
    assert line_finish("length", " Paris and the") == "length"
    assert line_finish("eos", " Paris") == "eos"
    lines = [record("length", 10, 40, prediction="Follow-up: a very long"),
             record("stop", 20, 5, prediction="Answer: Paris")]
    got = iterative_diagnostics(lines, "Paris")
    assert got["diag"] == {"followups_cut": 1}
    assert got["generation"]["answer"]["finish"] == "stop"
    assert got["generation"]["answer"]["empty"] is False
    assert iterative_diagnostics(lines, "")["generation"]["answer"]["empty"] is True


PAPER = {"riches/paper/keys": ["single_hop"], "riches/paper/beam": ["single_hop"],
         "riches/paper/interleave": ["single_hop"],
         "riches/paper/main": ["single_hop", "multi_hop"]}  # nq-open; hotpotqa, musique


@pytest.mark.parametrize("experiment", sorted(PAPER))
def test_paper_budgets_hold_under_the_rehearsal(experiment: str, tmp_path_factory) -> None:
    """What `make rehearse` checks: the rehearsal caps every budget to a few tokens, yet each
    paper cell's configured budget is checked, with the stand-in tokenizer (800 entries: more
    tokens per word than any real one), against its prompt (wiki-vital leads: the longest
    text the fixture corpus can hold for the demonstrations' articles)."""
    from ragrepro.rehearsal.config import apply
    from ragrepro.rehearsal.standins import standin_dir

    root = tmp_path_factory.mktemp("rehearsal")
    base = compose_experiment(experiment)
    lm = tok_lm_at(str(standin_dir(str(base.model.source), root)))
    params = OmegaConf.load(option_file("experiment", experiment)).hydra.sweeper.params
    keys = str(params.get("riches/keys@riches.key", base.riches.key.name)).split(",")
    for key in keys:
        cfg = compose_experiment(experiment, f"riches/keys@riches.key={key}", "rehearsal=cpu")
        apply(cfg, root, root / "results")
        s = instantiate(cfg.riches, _convert_="object")
        assert s.max_new_tokens <= 16                        # capped for speed ...
        uncapped = OmegaConf.to_container(cfg.rehearsal.uncapped)
        for name in PAPER[experiment]:                       # ... the configured one holds
            check_decoding(s, prompt_for(s, name, lm), lm, uncapped)
            check_reader(s, shipped_prompt(name), lm, uncapped)
            check_iterative(s, shipped_prompt(name), lm, uncapped)
