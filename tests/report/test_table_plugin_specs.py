"""A table spec in a plug-in's own conf folder is found through the config search path:
`ragrepro table toy/main` builds the results table of a method the core has never heard of
from <its conf>/report/tables/toy/main.yaml, with a 95% CI on every number. The conf folder
reaches the search path the way a registered method's does: a Hydra search-path plugin
(hydra_plugins/ is a namespace package, so a plug-in ships its own)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ragrepro.paths import REPO_ROOT
from ragrepro.report.result_specs import load_result_spec
from ragrepro.report.spec import spec_dirs, table_files
from ragrepro.tracking import Run

SEARCH_PATH_PLUGIN = '''
from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin


class ToyConf(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        search_path.append(provider="toy", path="file://{conf}")
'''

SPEC = """# the toy method's table: one row per `temperature`, its score with a 95% CI
results:
  layout: runs
  title: "Toy {table}"
  by: [temperature]
  metrics: [score]
  ci_metrics: [score]
  context: [model]
  reference: {column: temperature, value: "0.0", label: greedy}
  paired: [score]
  pair_on: [model]
"""


def _toy_run(root: Path, run_id: str, temperature: float, scores: list[float]) -> None:
    run = Run("toy/main", run_id, root)
    run.start()
    for i, s in enumerate(scores):
        run.add_sample({"qid": f"q{i}", "score": s})
    settings = {"model": "toy-lm", "temperature": temperature}
    run.finish({"name": "toy/main"}, {"score": sum(scores) / len(scores)}, settings,
               {"git_commit": "abc1234", "git_dirty": False})


def _plugin(tmp_path: Path) -> tuple[Path, Path]:
    """(the folder to put on PYTHONPATH, the toy's conf folder)."""
    conf = tmp_path / "toyconf"
    (conf / "report" / "tables" / "toy").mkdir(parents=True)
    (conf / "report" / "tables" / "toy" / "main.yaml").write_text(SPEC, encoding="utf-8")
    code = tmp_path / "code"
    (code / "hydra_plugins" / "toy_conf").mkdir(parents=True)
    (code / "hydra_plugins" / "toy_conf" / "__init__.py").write_text(
        SEARCH_PATH_PLUGIN.format(conf=conf), encoding="utf-8")
    return code, conf


def test_a_spec_folder_of_ones_own_is_read(tmp_path: Path) -> None:
    _code, conf = _plugin(tmp_path)
    assert "toy/main" in table_files(conf / "report")
    spec = load_result_spec("toy/main", conf / "report")
    assert spec["layout"] == "runs" and spec["by"] == ["temperature"]
    assert spec_dirs()[0] == REPO_ROOT / "conf" / "report"  # conf/ is searched first


def test_ragrepro_table_finds_a_plugin_spec_through_the_search_path(tmp_path: Path) -> None:
    code, _conf = _plugin(tmp_path)
    res = tmp_path / "results"
    # greedy: 3 of 4 right; sampled: 1 of 4 right, on the same questions
    _toy_run(res, "greedy", 0.0, [1.0, 1.0, 1.0, 0.0])
    _toy_run(res, "sampled", 1.0, [1.0, 0.0, 0.0, 0.0])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), str(REPO_ROOT)]),
           "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "ragrepro.cli", "table", "toy/main",
                          "--results", str(res), "--resamples", "200"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    md = (res / "toy" / "main_table.md").read_text(encoding="utf-8")
    assert md.startswith("# Toy main")
    rows = {line.split("|")[1].strip(): line for line in md.splitlines()
            if line.startswith(("| 0", "| 1"))}
    # the means 0.75 and 0.25, each with an interval inside [0, 1]
    assert "0.750 [" in rows["0"] and "0.250 [" in rows["1"]
    # greedy minus sampled on the same questions: +0.5, paired
    assert "+0.500 [" in rows["1"]
