"""Issue 28 item 5: every bad value a user tried ends in exit code 2, `error: <message>` with
the key (or path) and the fix, no traceback, and nothing loaded: in the run and in every
subcommand. Most cases call `ragrepro.cli.main` in this process with the model loaders, the
JVM and the tiny T5 replaced by functions that fail the test when called; a few run the real
command in a subprocess, where a traceback would show on stderr."""
from __future__ import annotations

import json
import logging
import os
import struct
import sys
from pathlib import Path

import pytest
import warm_cli
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ragrepro import assets, cli, configcheck, positions
from ragrepro.data.records import LMDoc
from ragrepro.deferred import Deferred
from ragrepro.errors import ConfigError, DataError
from ragrepro.paths import CONF_DIR, REPO_ROOT
from ragrepro.tracking import run_id_of
from ragrepro.validate import config_errors
from ralm.lm_eval import WARN_FACTOR, check_scored_tokens

LOADED = "Loaded "  # ragrepro.models.lm.load_lm logs "Loaded <model> (...)"


class Loaded(BaseException):
    """Raised by a loader in these tests: a BaseException, so that neither Hydra's
    instantiate nor the CLI's wrapper can turn it into an error message."""


@pytest.fixture
def nothing_loads(monkeypatch):
    """Any model load or JVM start fails the test."""
    def refuse(*args, **kwargs):
        raise Loaded(f"loaded something: {args} {kwargs}")

    for target in ("ragrepro.models.load_lm", "ragrepro.models.lm.load_lm",
                   "ragrepro.models.loading.load_pretrained", "filco.tiny_t5.load_tiny_t5",
                   "ragrepro.retrieval.jvm.start_jvm", "ragrepro.retrieval.bm25.start_jvm",
                   "ragrepro.lock.start_jvm"):
        monkeypatch.setattr(target, refuse)


@pytest.fixture
def ragrepro(monkeypatch, capsys, nothing_loads, tmp_path):
    """`ragrepro ARGS...` in this process -> (exit code, stdout + stderr)."""
    def call(*args: str) -> tuple[int, str]:
        monkeypatch.setattr(sys, "argv", ["ragrepro", *args])
        # cli.main configures logging for this call's stderr (capsys's): a handler left by a
        # previous call would write to a closed stream
        monkeypatch.setattr(logging.root, "handlers", [])
        with pytest.raises(SystemExit) as exit_:
            cli.main()
        out = capsys.readouterr()
        return exit_.value.code, out.out + out.err
    return call


def assert_refused(code: int, text: str, results: Path, *named: str,
                   started: bool = False) -> None:
    """Exit 2, one error naming `named`, no traceback, no model, no working folder; and, unless
    `started`, refused before the runner began (it logs `ragrepro.runner`)."""
    assert code == 2, text[-2000:]
    assert "Traceback" not in text and LOADED not in text
    assert started or "ragrepro.runner" not in text, text[-2000:]
    assert "error: " in text
    for fragment in named:
        assert fragment in text, f"{fragment!r} not in:\n{text[-2000:]}"
    assert not list(results.rglob("tmp_*")), "a working folder was left"


@pytest.fixture
def results(tmp_path) -> Path:
    return tmp_path / "results"  # conftest points RAGREPRO_RESULTS here


# -- the run: values, keys, groups -----------------------------------------------------------
RUN_CASES = [
    # (args, fragments the message must name: the key and value, then the fix)
    (["experiment=ralm/table1", "ralm.max_length=100000"],
     ["ralm.max_length=100000", "8192 token positions", "Set ralm.max_length<=8192"]),
    (["experiment=ralm/table1", "ralm/rerank=predictive", "reranker.max_length=1000"],
     ["reranker.max_length=1000", "512 token positions", "reranker.max_length<=512"]),
    (["experiment=filco/fig4", "filco.measure=nonexistent"],
     ["filco.measure='nonexistent'", "one of auto, strinc, lexical, cxmi"]),
    (["experiment=filco/fig4", "filco.measure=lexicl"],
     ["filco.measure='lexicl'", "Did you mean 'lexical'?"]),
    (["experiment=filco/fig4", "filco.splitter=pysdb"], ["filco.splitter", "'pysbd'"]),
    (["experiment=riches/main", "riches.key.unit=titel"],
     ["riches.key.unit='titel'", "Did you mean 'title'"]),
    (["experiment=ralm/table4", "qa.doc_source=retreive"],
     ["qa.doc_source='retreive'", "Did you mean 'retrieve'?"]),
    (["experiment=ralm/table1", "ralm.strid=4"],
     ["ralm.strid is not a key of `ralm`", "Did you mean ralm.stride", "Keys of `ralm`"]),
    (["experiment=ralm/table1", "~ralm.strid"], ["ralm.strid is not a key", "ralm.stride"]),
    (["-m", "experiment=ralm/table1", "ralm.k=1,2", "ralm.strid=4"], ["Did you mean ralm.stride"]),
    (["experiment=ralm/table1", "model.nmae=x"], ["model.nmae", "Did you mean model.name?"]),
    (["experiment=core/smoke", "+foo=1"],
     ["+foo=1", "root key `foo`", "nothing in ragrepro reads", "+notes=...", "RootKeys"]),
    (["experiment=core/smoke", "+seeds=3"], ["`seeds`", "Did you mean 'seed'?"]),
    (["experiment=core/smoke", "++foo.bar=3"], ["root key `foo`"]),
    (["experiment=core/smoke", "hydra/launcher=nonexistent"],
     ["Unknown hydra/launcher 'nonexistent'", "basic", "slurm", "ray", "local_parallel"]),
    (["experiment=core/smoke", "hydra/launcher=slrum"], ["Did you mean 'slurm'"]),
    (["experiment=ralm/tabel1"], ["Unknown experiment 'ralm/tabel1'", "'ralm/table1'"]),
    (["experiment=ralm/table1", "model=gpt3"], ["Unknown model 'gpt3'", "'gpt2'"]),
    (["experiment=filco/fig4", "filco/variant=psgx"], ["filco/variant 'psgx'", "'psg'"]),
    (["experiment=riches/main", "riches/keys@riches.key=titlex"],
     ["riches/keys 'titlex'", "'title'"]),
    (["experiment=ralm/table1", "ralm.k=[1"], ["Cannot read the override", "key=value"]),
    (["experiment=ralm/table1", "ralm.k=2.5"], ["ralm.k=2.5 must be an integer >= 1"]),
]


@pytest.mark.parametrize("args,named", RUN_CASES, ids=[" ".join(a) for a, _ in RUN_CASES])
def test_a_bad_run_value_exits_2_before_anything_loads(ragrepro, results, args, named):
    code, text = ragrepro(*args)
    assert_refused(code, text, results, *named)


def test_a_value_at_the_models_limit_passes():
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        at = compose("config", overrides=["experiment=ralm/table1", "ralm.max_length=8192"])
        above = compose("config", overrides=["experiment=ralm/table1", "ralm.max_length=8193"])
    assert config_errors(at) == []
    assert [e.split(" is above")[0] for e in config_errors(above)] == ["ralm.max_length=8193"]


# -- the data a run reads -------------------------------------------------------------------------
def _text_cases(tmp_path: Path) -> list[tuple[str, list[str]]]:
    folder = tmp_path / "texts"
    folder.mkdir()
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    (tmp_path / "five.txt").write_text("Hello world, a cat.", encoding="utf-8")  # 19 bytes
    return [(str(folder), [f"dataset.path={folder} is a folder", "Point dataset.path to the file"]),
            (str(tmp_path / "missing.txt"), ["missing.txt: no such file", "Check the path"]),
            (str(tmp_path / "empty.txt"), ["empty.txt: it is empty", "min_scored_tokens=100",
                                           "Evaluate a longer text"]),
            (str(tmp_path / "five.txt"), ["five.txt: its 19 bytes give at most 20 scored tokens",
                                          "below min_scored_tokens=100"])]


def test_a_bad_text_file_exits_2_naming_the_path_before_the_model(ragrepro, results, tmp_path):
    for path, named in _text_cases(tmp_path):
        code, text = ragrepro("experiment=ralm/table1", "dataset=local_text",
                              f"dataset.path={path}", "ralm/rerank=none")
        assert_refused(code, text, results, *named)


def test_an_empty_text_is_refused_by_its_loader_before_the_model(ragrepro, results, tmp_path):
    """With the minimum lowered to 1 the file check lets an empty file through; the texts are
    built before the model (ralm/conf/ralm/base.yaml) and the loader names the file."""
    (tmp_path / "e.jsonl").write_text('{"text": ""}\n{"text": "  "}\n', encoding="utf-8")
    code, text = ragrepro("experiment=ralm/table1", "dataset=local_text",
                          f"dataset.path={tmp_path / 'e.jsonl'}", "ralm/rerank=none",
                          "min_scored_tokens=1")
    assert_refused(code, text, results, "e.jsonl: no text to evaluate",
                   "every record's 'text' is", started=True)
    assert "Building the pipeline" not in text  # the loader's own message, not a wrapper's


def test_a_pipeline_error_after_the_start_leaves_no_working_folder(ragrepro, results):
    code, text = ragrepro("experiment=core/smoke", "smoke.metrics=[em_squadx]")
    assert_refused(code, text, results, "Unknown metric 'em_squadx'", "'em_squad'",
                   started=True)
    assert (results / "core" / "smoke").is_dir()  # it had started: only tmp_* is gone


def test_the_byte_bound_is_exact_at_the_minimum(tmp_path):
    """b bytes give at most b + 1 scored tokens: refused only when b + 1 < minimum."""
    below, at = tmp_path / "a.txt", tmp_path / "b.txt"
    below.write_bytes(b"x" * 98)
    at.write_bytes(b"x" * 99)
    with pytest.raises(ConfigError, match="its 98 bytes give at most 99 scored tokens"):
        configcheck.check_text_size("dataset", below, 100)
    configcheck.check_text_size("dataset", at, 100)


@pytest.mark.slow
def test_no_tokenizer_gives_more_scored_tokens_than_bytes_plus_one(smollm, gemma):
    texts = ["a", " x", "Hello world, a cat.", "café crème brûlée", "日本語のテキスト", "1 2 3 4 5"]
    for lm in (smollm, gemma):
        for t in texts:
            scored = len(lm.encode(t)) - 1  # token 0 is never scored
            assert scored <= len(t.encode("utf-8")) + 1, (lm.name, t)


# -- the scored-token minimum after the tokenizer (ralm.lm_eval) ---------------------------------
TEXTS = [LMDoc("a", "one", title="One"), LMDoc("b", "two", title="Two")]
DATASET = Deferred({"_target_": "unused", "name": "local_text", "path": "/data/t.txt"})


def test_too_few_scored_tokens_are_refused_naming_the_file_and_the_minimum():
    streams = [[5, 6, 7, 8], [9, 10]]  # 3 + 1 scored tokens
    with pytest.raises(DataError, match=r"dataset local_text \(/data/t\.txt\): the text gives "
                                        r"4 scored token\(s\), below min_scored_tokens=5.*"
                                        r"set min_scored_tokens=4"):
        check_scored_tokens(streams, TEXTS, "per_document", DATASET, 5)
    check_scored_tokens(streams, TEXTS, "per_document", DATASET, 4)


def test_a_short_run_is_warned_about(caplog):
    with caplog.at_level(logging.WARNING, logger="ralm.lm_eval"):
        check_scored_tokens([list(range(11))], TEXTS[:1], "joined", DATASET, 1)  # 10 scored
    assert caplog.records == []  # 10 = WARN_FACTOR x 1: not below
    with caplog.at_level(logging.WARNING, logger="ralm.lm_eval"):
        check_scored_tokens([list(range(10))], TEXTS[:1], "joined", DATASET, 1)  # 9 scored
    assert WARN_FACTOR == 10 and "only 9 scored tokens (< 10" in caplog.text


def test_a_text_that_scores_nothing_is_named_with_its_index_and_title():
    with pytest.raises(DataError, match=r"text 1 \('Two'\) has 1 token\(s\).*ralm.stream=joined"):
        check_scored_tokens([[1, 2, 3], [4]], TEXTS, "per_document", DATASET, 1)


# -- free keys, and keys outside the run id ----------------------------------------------------
def test_free_keys_pass_and_do_not_change_the_run_id():
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        base = configcheck.compose_checked(["experiment=core/smoke"])
        free = configcheck.compose_checked(["experiment=core/smoke", "+notes=first try",
                                            "+tags=[a]", "+wandb.notes=x", "min_scored_tokens=5"])
    ids = {run_id_of(OmegaConf.to_container(c, resolve=True)) for c in (base, free)}
    assert len(ids) == 1


def test_a_key_added_under_an_existing_plain_node_passes():
    """`+model.device_map=auto`: a model loader argument the YAML leaves out is not refused."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        cfg = configcheck.compose_checked(["experiment=ralm/table1", "+model.device_map=auto"])
    assert cfg.model.device_map == "auto"


# -- every subcommand ---------------------------------------------------------------------------
def test_plan_checks_each_cell_as_the_run_does(ragrepro, results):
    for args, named in [
        (["-m", "experiment=ralm/table1", "ralm.k=2.5"], ["ralm.k=2.5 must be an integer >= 1"]),
        (["experiment=ralm/tabel1"], ["Unknown experiment 'ralm/tabel1'", "'ralm/table1'"]),
        (["experiment=ralm/table1", "model=gpt3"], ["Unknown model 'gpt3'", "'gpt2'"]),
        (["experiment=ralm/table1", "ralm.strid=2"], ["Did you mean ralm.stride"]),
        (["experiment=ralm/table1", "ralm.max_length=100000"], ["ralm.max_length<=8192"]),
    ]:
        assert_refused(*ragrepro("plan", *args), results, *named)


def test_lock_checks_each_cell_as_the_run_does(ragrepro, results, tmp_path):
    out = str(tmp_path / "lock.yaml")
    for args, named in [
        (["experiment=core/smoke", "model=gpt3"], ["Unknown model 'gpt3'", "'gpt2'"]),
        (["experiment=ralm/table1", "ralm.k=2.5"], ["ralm.k=2.5 must be an integer >= 1"]),
        (["-m", "experiment=ralm/table1", "ralm.strid=2"], ["Did you mean ralm.stride"]),
    ]:
        assert_refused(*ragrepro("lock", *args, "-o", out), results, *named)
    assert not Path(out).exists()


def test_the_report_subcommands_name_what_to_fix(ragrepro, results):
    for args, named in [
        (["table", "ralm/tabel1"], ["No table ['ralm/tabel1']", "Did you mean 'ralm/table1'"]),
        (["table", "ralm/table1", "--experiment", "ralm/tabel1"],
         ["Unknown experiment 'ralm/tabel1'", "'ralm/table1'"]),
        (["samples", "ralm/tabel1"], ["No finished run of experiment 'ralm/tabel1'"]),
        (["compare", "a", "b"], ["No run 'a'"]),
        (["judge", "ralm/tabel1"], ["No finished run with a recorded judge",
                                    "Did you mean 'ralm/table1'"]),
    ]:
        code, text = ragrepro(*args)
        assert code == 2 and "Traceback" not in text, text
        assert all(n in text for n in named), text


def test_one_wrapper_turns_user_errors_into_exit_2_and_keeps_bugs(capsys):
    def user():
        raise ConfigError("x=1 is wrong; set x=2.")

    def bug():
        raise KeyError("a bug")

    with pytest.raises(SystemExit) as e:
        cli.user_errors_exit_2(user)
    assert e.value.code == 2 and capsys.readouterr().err == "error: x=1 is wrong; set x=2.\n"
    with pytest.raises(KeyError):
        cli.user_errors_exit_2(bug)


# -- the real command line: no traceback on stderr ------------------------------------------------
@pytest.mark.parametrize("args,named", [
    (["experiment=ralm/table1", "ralm.strid=4"], "Did you mean ralm.stride"),
    (["experiment=core/smoke", "hydra/launcher=nonexistent"], "Unknown hydra/launcher"),
    (["experiment=core/smoke", "+foo=1"], "root key `foo`"),
    (["plan", "experiment=ralm/table1", "ralm.k=2.5"], "ralm.k=2.5 must be"),
    (["table", "ralm/tabel1"], "Did you mean 'ralm/table1'"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_the_real_command_prints_one_error_line(tmp_path, args, named):
    env = {**os.environ, "RAGREPRO_RESULTS": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "WANDB_MODE": "disabled"}
    out = warm_cli.run([*args], env=env, cwd=REPO_ROOT, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and named in out.stderr
    assert out.stderr.startswith("error: ") or "\nerror: " in out.stderr
    assert not list(tmp_path.rglob("tmp_*"))


# -- where the model's positions come from ------------------------------------------------------
def test_the_embedded_positions_are_what_their_gguf_files_declare():
    files = {"smollm2": assets.smollm2_gguf(), "gemma3": assets.gemma3_gguf()}
    assert set(files) == set(positions.EMBEDDED_POSITIONS)
    assert {n: positions.gguf_context_length(p) for n, p in files.items()} \
        == positions.EMBEDDED_POSITIONS


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def test_the_gguf_header_reader_skips_arrays_and_finds_the_context(tmp_path):
    body = (_gguf_string("general.architecture") + struct.pack("<I", 8) + _gguf_string("llama")
            + _gguf_string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 2)
            + _gguf_string("a") + _gguf_string("bc")
            + _gguf_string("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 3)
            + struct.pack("<fff", 0.0, 1.0, 2.0)
            + _gguf_string("llama.context_length") + struct.pack("<II", 4, 4096))
    path = tmp_path / "m.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 4) + body)
    assert positions.gguf_context_length(path) == 4096
    assert positions.model_positions({"source": str(path)}) == (4096, "context_length in m.gguf")


def test_a_config_json_folder_gives_its_positions(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_positions": 1024}))
    assert positions.model_positions({"source": str(tmp_path)})[0] == 1024
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "roberta",
                                                      "max_position_embeddings": 514}))
    assert positions.model_positions({"source": str(tmp_path)})[0] == 512  # padding offset
    assert positions.model_positions({"source": "nobody/not-downloaded"}) is None
