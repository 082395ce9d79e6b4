"""FilCo's typed pipeline node: the settings dataclasses refuse misspelt and missing keys when
the pipeline is built, the question sets come from composed dataset nodes (the evaluation
`dataset`, the mini `train_dataset`), and the task is the dataset's."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from omegaconf import OmegaConf

from filco.data import load_split
from filco.resources import task_of
from filco.settings import FilcoSettings
from filco.variants import Psg
from ragrepro.data.loaders import load_qa
from ragrepro.errors import ConfigError
from ragrepro.paths import CONF_DIR
from ragrepro.pipeline import build_pipeline


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_mini_settings_are_typed_with_the_yaml_values():
    cfg = _compose("experiment=filco/fig4", "filco/variant=psg")
    fc = instantiate(cfg.filco, _convert_="object")
    assert isinstance(fc, FilcoSettings) and isinstance(fc.setting, Psg)
    assert (fc.k, fc.passages, fc.max_input_tokens) == (1, "retriever", 512)
    assert (fc.fallback.gen_train, fc.cxmi.prompt) == ("top1", "paper")
    gen = fc.train.config("gen", seed=7)
    # common (mini.yaml) + the gen role's own key; the input length follows filco.max_input_tokens
    assert (gen.max_target_tokens, gen.max_input_tokens, gen.max_steps, gen.lr, gen.seed) == (
        24, 512, 4, 1e-3, 7)
    assert fc.train.config("psg", seed=0).max_target_tokens == 4


@pytest.mark.parametrize("override,match", [
    ("+filco.measure_mod=code", "measure_mod"),            # misspelt key
    ("~filco.gen_format", "gen_format"),                    # missing key
    ("+filco.train.gen.lr_rate=0.1", "lr_rate"),            # unknown training key
    ("filco.setting=psg", r"filco.setting='psg' .*`filco/variant=psg`"),  # a name, not a group
])
def test_bad_settings_fail_when_the_pipeline_is_built(override, match):
    cfg = _compose("experiment=filco/table2", override)
    with pytest.raises(ConfigError, match=match):
        build_pipeline(cfg)


def test_retrieval_pipeline_gets_the_dataset_and_its_task():
    cfg = _compose("experiment=filco/table2", "dataset=fanout-grounded", "limit=3")
    p = build_pipeline(cfg)
    test = p.keywords["test"]
    assert test.row() == {"dataset": "fanout-grounded", "dataset_variant": "fanoutqa-1.1.1",
                          "split": "dev", "limit": 3, "dataset_path": None,
                          "dataset_hops": None}
    assert len(test.records) == 3 and p.keywords["task"] == "qa"
    assert p.keywords["retriever"].name == "bm25" and p.keywords["corpus"].name == "wiki-vital"


def test_mini_training_set_is_vital_qa_train_whatever_the_dataset():
    cfg = _compose("experiment=filco/fig4", "dataset=fanout-grounded")
    node = OmegaConf.to_container(cfg.train_dataset, resolve=True)
    train = load_split(node)
    assert train.row() == {"dataset": "vital-qa", "dataset_variant": "embedded-v2",
                           "split": "train", "limit": 32, "dataset_path": None,
                           "dataset_hops": None}
    assert list(train.records) == load_qa("vital-qa", "train", limit=32)
    assert cfg.limit == 24 and cfg.dataset.name == "fanout-grounded"


def test_paper_training_set_is_the_datasets_train_split():
    cfg = _compose("experiment=filco/paper/fig4", "dataset=triviaqa")
    train = OmegaConf.to_container(cfg.pipeline.train, resolve=True)
    assert (train["dataset"]["name"], train["split"], train["limit"]) == ("triviaqa", "train",
                                                                        None)
    assert OmegaConf.to_container(cfg.pipeline.test, resolve=True)["dataset"]["name"] == "triviaqa"


def test_task_is_the_datasets_unless_set():
    fc = instantiate(_compose("experiment=filco/fig4").filco, _convert_="object")
    assert task_of(fc, "qa").name == "qa"
    fc = instantiate(_compose("experiment=filco/fig4", "filco.task=fever").filco,
                     _convert_="object")
    assert task_of(fc, "qa").name == "fever"


@pytest.mark.parametrize("dataset,task", [
    ("nq-open", "nq"), ("nq-open-dpr", "nq"), ("triviaqa", "tqa"), ("triviaqa-dpr", "tqa"),
    ("hotpotqa", "hotpotqa"), ("eli5", "eli5"), ("fever", "fever"), ("wow", "wow"),
    ("vital-qa", "qa"), ("fanout-grounded", "qa"), ("local_qa", "qa")])
def test_every_filco_dataset_names_its_task(dataset, task):
    # the paper's six tasks (§3) and the mini sets: measure, metric and prompt fields follow
    fc = instantiate(_compose("experiment=filco/fig4").filco, _convert_="object")
    assert task_of(fc, _compose("experiment=filco/fig4", f"dataset={dataset}").dataset.task).name \
        == task
