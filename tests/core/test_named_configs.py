"""ragrepro.named_configs (configs chosen by name) and ragrepro.pipeline (the pipeline contract);
the RALM modules no longer import each other in a cycle."""
import ast
from pathlib import Path

import pytest

from ragrepro.errors import ConfigError
from ragrepro.named_configs import group_config, model_config
from ragrepro.pipeline import Result

MODEL = """_target_: ragrepro.models.load_lm
name: toy
source: /models/toy
kind: causal
dtype: ${dtype}
device: ${device}
"""


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "toy.yaml").write_text(MODEL)
    (tmp_path / "model" / "toy2.yaml").write_text(MODEL.replace("toy", "toy2"))
    (tmp_path / "encoder").mkdir()
    (tmp_path / "encoder" / "listy.yaml").write_text("- a\n- b\n")
    return tmp_path


def test_model_config_fills_dtype_and_device(conf):
    cfg = model_config("toy", "bfloat16", "cuda", conf_dir=conf)
    assert cfg == {"_target_": "ragrepro.models.load_lm", "name": "toy", "source": "/models/toy",
                   "kind": "causal", "dtype": "bfloat16", "device": "cuda"}


def test_group_config_keeps_interpolations_unresolved(conf):
    cfg = group_config("model", "toy", conf_dir=conf)
    assert cfg._get_node("dtype")._value() == "${dtype}"


def test_unknown_name_lists_the_choices(conf):
    with pytest.raises(ConfigError, match=r"Unknown model config 'toy3'.*toy, toy2"):
        model_config("toy3", conf_dir=conf)


def test_a_list_file_is_refused_with_the_fix(conf):
    with pytest.raises(ConfigError, match="holds a list, not a mapping"):
        group_config("encoder", "listy", conf_dir=conf)


def test_real_model_config_matches_the_yaml():
    cfg = model_config("smollm2-135m", "float32", "cpu")
    assert (cfg["name"], cfg["dtype"], cfg["device"], cfg["add_bos"]) == \
        ("smollm2-135m", "float32", "cpu", False)


def test_result_is_the_one_the_runner_uses():
    from ragrepro import runner

    assert runner.Result is Result
    assert Result(metrics={"em": 1.0}).settings == {}


ROOT = Path(__file__).resolve().parents[2]


def imported_modules(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in a file, including those inside functions."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            out.append(("." * node.level + (node.module or ""), [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return out


def test_imported_modules_sees_imports_inside_functions(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\ndef g():\n    from .lm_eval import _x, y\n")
    assert imported_modules(f) == [("os", []), (".lm_eval", ["_x", "y"])]


def test_no_import_cycle_between_lm_eval_and_reranker():
    """lm_eval uses the reranker; the reranker must not import lm_eval back (it used to,
    inside functions, for document encoding and model loading)."""
    for name in ("reranker.py", "documents.py"):
        mods = [m for m, _ in imported_modules(ROOT / "ralm" / name)]
        assert not [m for m in mods if m.endswith("lm_eval")], name


def test_scripts_and_benchmarks_import_no_private_names():
    files = [*(ROOT / "scripts").glob("*.py"), *(ROOT / "benchmarks").glob("*.py")]
    bad = [(f.name, m, n) for f in files for m, names in imported_modules(f) for n in names
           if n.startswith("_") and not n.startswith("__")]
    assert bad == []


def test_library_packages_import_no_benchmark_or_script():
    """Benchmarks and scripts sit above the library: ragrepro, ralm, riches and filco never
    import them (and hold no module named bench*)."""
    files = [f for pkg in ("ragrepro", "ralm", "riches", "filco") for f in (ROOT / pkg).rglob("*.py")]
    bad = [(str(f.relative_to(ROOT)), m) for f in files for m, _ in imported_modules(f)
           if m.split(".")[0] in ("benchmarks", "scripts")]
    assert bad == []
    assert [f.name for f in files if f.stem.startswith("bench")] == []
