"""Each RICHES variant is its own typed pipeline target, chosen by the `riches/method` config
group; the settings are typed and built by Hydra; the iterative baseline's control flow."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.errors import ConfigCompositionException
from hydra.utils import instantiate
from omegaconf import OmegaConf

from ragrepro.configcheck import group_options, option_file
from ragrepro.data.records import QARecord
from ragrepro.errors import ConfigError
from ragrepro.paths import CONF_DIR
from ragrepro.pipeline import build_pipeline, is_legacy, pipeline_callable
from ragrepro.retrieval import Hit
from ragrepro.tracking import run_id_of
from riches import pipeline
from riches.baselines import ask_iteratively
from riches.inputs import prompt_name
from riches.settings import DenseSettings, KeySettings, Markers, RichesSettings

VARIANTS = {"riches": pipeline.riches, "no_retrieval": pipeline.no_retrieval,
            "dense_reader": pipeline.dense_reader, "iterative": pipeline.iterative}
EXPERIMENTS = [e for e in group_options("experiment") if e.startswith("riches/")
               and not e.endswith("_shards")]  # preprocessing jobs, not variants


def _compose(*overrides: str):
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        return compose("config", overrides=list(overrides))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_and_variant_names_a_typed_target(experiment: str) -> None:
    ids = set()
    for name, fn in VARIANTS.items():
        cfg = _compose(f"experiment={experiment}", f"riches/method={name}")
        assert pipeline_callable(cfg) is fn and not is_legacy(fn)
        assert cfg.method == name  # the row's `method` column
        resolved = OmegaConf.to_container(cfg, resolve=True)
        ids.add(run_id_of(resolved))
        # baselines get a retriever factory over the pipeline's corpus; RICHES gets none
        assert ("retriever" in cfg.pipeline) == (name in ("dense_reader", "iterative"))
        assert resolved["retriever"].get("_partial_", False) == ("retriever" in cfg.pipeline)
    assert len(ids) == len(VARIANTS)  # the variant is part of the run id


def test_main_sweeps_every_variant_with_riches_first() -> None:
    """dense_reader's k: auto reads the RICHES row of the same sweep, so RICHES runs first."""
    for experiment in ("riches/main", "riches/paper/main"):
        params = OmegaConf.load(option_file("experiment", experiment)).hydra.sweeper.params
        assert params["riches/method"].split(",") == list(VARIANTS)


def test_settings_are_typed_and_defaults_come_from_yaml() -> None:
    cfg = _compose("experiment=riches/main", "riches/keys@riches.key=title",
                   "riches.length_penalty=1")
    s = instantiate(cfg.riches, _convert_="object")
    assert isinstance(s, RichesSettings) and isinstance(s.key, KeySettings)
    assert s.markers == Markers(" <<", " >>") and s.dense == DenseSettings("auto", 1)
    assert s.length_penalty == 1.0 and isinstance(s.length_penalty, float)  # row says 1.0
    assert (s.key.name, s.key.evidence, s.key.demo, s.beam_size) == ("title", "document", "unit", 10)
    assert set(s.prompts) == {"single_hop", "multi_hop", "propositions"}
    assert s.prompts["multi_hop"]["name"] == "multi-hop"


@pytest.mark.slow  # a real embedded model: the pipeline loads SmolLM2 before the settings
def test_a_misspelt_or_removed_setting_fails_loudly() -> None:
    cfg = _compose("experiment=riches/main", "+riches.beam_sizee=3")
    with pytest.raises(ConfigError, match="beam_sizee"):
        build_pipeline(cfg)
    # the variant is the config group, not a free string that would leave the target alone
    with pytest.raises(ConfigCompositionException, match="riches.method"):
        _compose("experiment=riches/main", "riches.method=dense_reader")


def test_prompt_choice() -> None:
    prompts = {"single_hop": {}, "multi_hop": {}, "propositions": {}, "mine": {}}
    one, two = QARecord("a", "q", ["x"], hops=1), QARecord("b", "q", ["x"], hops=2)
    assert prompt_name("auto", prompts, [one]) == "single_hop"
    assert prompt_name("auto", prompts, [one, two]) == "multi_hop"
    assert prompt_name("mine", prompts, [two]) == "mine"
    for bad in ("propositions", "other"):
        with pytest.raises(ConfigError, match="riches.prompts"):
            prompt_name(bad, prompts, [one])


class ScriptedReader:
    """The LM's next line after each history, in order; records what it was shown."""

    def __init__(self, lines: list[str]) -> None:
        self.lines, self.seen = list(lines), []

    def line(self, history: str) -> str:
        self.seen.append(history)
        return self.lines.pop(0)


class OneRetriever:
    def __init__(self, found: dict[str, Hit]) -> None:
        self.found, self.queries = found, []

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        self.queries += queries
        return [[self.found[q]] if q in self.found else [] for q in queries]


def test_iterative_asks_follow_ups_then_answers() -> None:
    hit = Hit("1", "Redmond", "Redmond is a city.", 1.0)
    reader = ScriptedReader(["Follow-up: where is Microsoft?", "Answer: Redmond"])
    answer, hits, steps, trace = ask_iteratively(reader, OneRetriever({"where is Microsoft?": hit}),
                                                 "Q?", max_steps=4)
    assert (answer, hits, steps) == ("Redmond", [hit], 1)
    assert trace == ("Question: Q?\nFollow-up: where is Microsoft?\n"
                     "Evidence: Redmond. Redmond is a city.\n")
    assert reader.seen == ["Question: Q?\n", trace]


def test_iterative_forces_an_answer_when_nothing_is_found_or_steps_run_out() -> None:
    reader = ScriptedReader(["Follow-up: unknown", "Redmond"])
    retriever = OneRetriever({})
    answer, hits, steps, trace = ask_iteratively(reader, retriever, "Q?", max_steps=4)
    assert (answer, hits, steps, trace) == ("Redmond", [], 4, "Question: Q?\n")
    assert reader.seen[-1] == "Question: Q?\nAnswer:" and retriever.queries == ["unknown"]
    hit = Hit("1", "T", "x", 1.0)
    reader = ScriptedReader(["a", "b", "forced"])
    answer, hits, steps, _ = ask_iteratively(reader, OneRetriever({"a": hit, "b": hit}), "Q?",
                                             max_steps=2)
    assert (answer, hits, steps) == ("forced", [hit, hit], 2)
    assert reader.seen[-1].endswith("Evidence: T. x\nAnswer:")


def test_no_riches_module_reads_conf_files() -> None:
    """Prompts and settings arrive composed; riches/ never opens a file under conf/, except
    its profile's rehearsal hook, which builds the Factoid-Wiki fixture from the shipped
    prompts' demonstrations before any config is composed."""
    readers = {path.name for path in Path(pipeline.__file__).parent.glob("*.py")
               if "CONF_DIR" in (text := path.read_text(encoding="utf-8"))
               or "import yaml" in text}
    assert readers == {"profile.py"}


def test_an_own_prompt_is_a_composed_config_node() -> None:
    cfg = _compose("experiment=riches/main", "+riches/prompts@riches.prompts.mine=multi_hop",
                   "riches.prompt=mine")
    s = instantiate(cfg.riches, _convert_="object")
    assert list(s.prompts) == ["single_hop", "multi_hop", "propositions", "mine"]
    assert prompt_name(s.prompt, s.prompts, []) == "mine"
    assert s.prompts["mine"] == s.prompts["multi_hop"]
