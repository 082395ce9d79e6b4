"""Adding a dataset is one YAML file (issue 15); dataset properties live in that file.

A new dataset config written into a temporary config folder is found by the real command line
(`hydra.searchpath`), runs an experiment, and the rows and samples are its records. The
properties that used to be tables keyed by dataset name (FilCo's task, where a hub split comes
from) are read from the YAMLs and equal the old tables."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
import warm_cli
from omegaconf import OmegaConf

from ragrepro.configcheck import check_overrides, group_options
from ragrepro.data.catalog import dataset_config, dataset_property, load_named
from ragrepro.data.hub import split_source_of
from ragrepro.errors import ConfigError
from ragrepro.paths import CONF_DIR

REPO_ROOT = CONF_DIR.parent

# The tables keyed by dataset name before issue 15 (filco/data.py DATASET_TASKS,
# ragrepro/data/loaders.py HUB_QA + KILT_TASKS).
OLD_FILCO_TASKS = {"nq-open": "nq", "nq-open-dpr": "nq", "triviaqa": "tqa", "triviaqa-dpr": "tqa",
                   "hotpotqa": "hotpotqa", "eli5": "eli5", "fever": "fever", "wow": "wow",
                   "vital-qa": "qa", "vital-qa-bridge": "qa", "fanout-grounded": "qa",
                   "local_qa": "qa"}
OLD_HUB_QA = ("nq-open", "triviaqa", "hotpotqa", "musique", "eli5", "fever", "wow")
OLD_SPLIT_SOURCE = {"test": "validation", "validation": "validation", "train": "train",
                    "all": "all",
                    "dev": "train (held-out dev: 1 row in 10, ragrepro-dev-v1)",
                    "train-nodev": "train (without the held-out dev rows, ragrepro-dev-v1)"}

ROWS = [{"question": "Which river flows through Paris?", "question_id": "my_1",
         "answer": {"value": "Seine", "aliases": ["River Seine"]}},
        {"question": "Who wrote Hamlet?", "question_id": "my_2",
         "answer": {"value": "William Shakespeare", "aliases": ["Shakespeare"]}},
        {"question": "What is the capital of Japan?", "question_id": "my_3",
         "answer": {"value": "Tokyo", "aliases": []}}]

NEW_YAML = """\
# Our own QA set: rows in TriviaQA's hub schema, kept in a local JSONL.
_target_: ragrepro.data.hub.hub_qa
name: my-trivia
task: tqa
variant: v1
split: test
limit: ${{limit}}
repo: my-lab/my-trivia
config: null
converter: {converter}
split_map: {{test: validation}}
heldout_dev: null
path: {path}
local_fields: [question, question_id, answer]
file_help: JSONL rows in TriviaQA's schema
"""


def write_dataset(conf: Path, rows_path: Path, converter: str = "trivia_qa_row") -> None:
    (conf / "dataset").mkdir(parents=True, exist_ok=True)
    rows_path.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    (conf / "dataset" / "my-trivia.yaml").write_text(
        NEW_YAML.format(converter=converter, path=rows_path), encoding="utf-8")


@pytest.mark.slow
def test_a_new_dataset_yaml_runs_an_experiment_through_the_cli(tmp_path):
    conf, results = tmp_path / "conf", tmp_path / "results"
    write_dataset(conf, tmp_path / "rows.jsonl")
    env = {**os.environ, "RAGREPRO_RESULTS": str(results), "WANDB_MODE": "disabled",
           "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = warm_cli.run(["experiment=ralm/table4", "dataset=my-trivia",
                        f"hydra.searchpath=[file://{conf}]", "limit=2", "qa.num_docs=0",
                        "wandb.mode=disabled"], env=env, cwd=REPO_ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    with open(results / "ralm" / "table4.csv", encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["dataset"], row["dataset_variant"], row["split"]) == ("my-trivia", "v1", "test")
    assert row["n_examples"] == "2" and row["limit"] == "2"
    assert not row.get("split_source")  # a local file: no hub split to name
    (run_dir,) = [p for p in (results / "ralm" / "table4").iterdir() if p.is_dir()]
    samples = [json.loads(x) for x in (run_dir / "samples.jsonl").read_text().splitlines()]
    assert [(s["qid"], s["question"], s["answers"]) for s in samples] == [
        ("my_1", "Which river flows through Paris?", ["Seine", "River Seine"]),
        ("my_2", "Who wrote Hamlet?", ["William Shakespeare", "Shakespeare"])]


def test_a_converter_of_ones_own_by_dotted_path(tmp_path, monkeypatch):
    """A schema no registered converter reads: a function in the user's package."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "my_rows.py").write_text(
        "from ragrepro.data.records import QARecord\n\n\n"
        "def row(r, i, split, config):\n"
        "    return QARecord(qid=f'mine-{i}', question=r['question'].upper(),\n"
        "                    answers=[r['answer']['value']], split=split)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(pkg))
    write_dataset(tmp_path / "conf", tmp_path / "rows.jsonl", converter="my_rows.row")
    records = load_named("my-trivia", conf_dir=tmp_path / "conf", limit=3)
    assert [(r.qid, r.question, r.answers) for r in records] == [
        ("mine-0", "WHICH RIVER FLOWS THROUGH PARIS?", ["Seine"]),
        ("mine-1", "WHO WROTE HAMLET?", ["William Shakespeare"]),
        ("mine-2", "WHAT IS THE CAPITAL OF JAPAN?", ["Tokyo"])]
    assert dataset_property("my-trivia", "task", conf_dir=tmp_path / "conf") == "tqa"
    write_dataset(tmp_path / "conf", tmp_path / "rows.jsonl", converter="no_such_row")
    with pytest.raises(ConfigError, match="Unknown converter 'no_such_row'.*nq_open_row"):
        load_named("my-trivia", conf_dir=tmp_path / "conf")


def test_the_command_line_check_sees_the_added_config_folder(tmp_path):
    write_dataset(tmp_path / "conf", tmp_path / "rows.jsonl")
    with pytest.raises(ConfigError, match="Unknown dataset 'my-trivia'"):
        check_overrides(["dataset=my-trivia"])
    check_overrides(["dataset=my-trivia", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"])
    check_overrides(["--config-dir", str(tmp_path / "conf"), "dataset=my-trivia"])
    with pytest.raises(ConfigError, match="Unknown dataset 'my-trivi'"):
        check_overrides(["dataset=my-trivi", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"])


def test_filco_task_comes_from_the_yamls():
    names = group_options("dataset")
    tasks = {n: dataset_property(n, "task") for n in names}
    assert {n: t for n, t in tasks.items() if t in set(OLD_FILCO_TASKS.values())} \
        == OLD_FILCO_TASKS
    assert {n for n, t in tasks.items() if t == "lm"} == {
        "arxiv", "foldoc", "freelaw", "local_text", "realnews", "stackexchange", "wiki-vital",
        "wikitext-103"}


@pytest.mark.parametrize("name", group_options("dataset"))
def test_split_source_is_the_old_one(name):
    for split, source in OLD_SPLIT_SOURCE.items():
        for path in (None, "/x.jsonl"):
            node = dataset_config(name)
            node.split = split
            if path or "path" in node:
                node.path = path
            expected = source if name in OLD_HUB_QA and not path else None
            assert split_source_of(node) == expected, (name, split, path)


def test_rows_get_split_source_from_the_composed_dataset():
    from hydra import compose, initialize_config_dir

    from ragrepro.runner import base_settings

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        fever = compose(config_name="config", overrides=["dataset=fever", "dataset.split=dev"])
        vital = compose(config_name="config", overrides=["dataset=vital-qa"])
    assert base_settings(fever)["split_source"] == OLD_SPLIT_SOURCE["dev"]
    assert "split_source" not in base_settings(vital)
    assert OmegaConf.select(fever, "dataset.heldout_dev.every") == 10
