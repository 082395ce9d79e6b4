"""Each built-in method is one folder (issue 31, item 1): its package holds its own conf/
(the profile's `conf_dir`), found through the same seam as a plug-in's; the core's conf/ keeps
only what every method shares."""
from __future__ import annotations

import importlib
import importlib.metadata
from pathlib import Path

import pytest
import yaml

from ragrepro.configcheck import config_dirs, group_options, option_file
from ragrepro.methods import ENTRY_POINT_GROUP, MethodProfile, conf_dirs
from ragrepro.paths import CONF_DIR, REPO_ROOT
from ragrepro.report.paper import paper_files
from ragrepro.report.result_specs import result_spec_names
from ragrepro.report.spec import SPEC_DIR, plot_files, table_files
from scripts.rehearse import paper_experiments


def shipped() -> list[MethodProfile]:
    """The three profiles this repository's own distribution registers (a plug-in installed
    beside them is not one of them)."""
    entries = [e for e in importlib.metadata.distribution("ragrepro").entry_points
               if e.group == ENTRY_POINT_GROUP]
    return sorted((e.load() for e in entries), key=lambda p: p.name)


def method_roots(profile: MethodProfile) -> set[str]:
    """Top-level conf names that are the method's own: its name, packages, config nodes
    (`reranker`, `scorer`) and the first part of its config groups (`ralm/rerank`)."""
    return {profile.name, *profile.packages, *profile.config_nodes,
            *(g.split("/")[0] for g in profile.config_groups)}


def test_the_shipped_methods_are_the_three_papers():
    assert [p.name for p in shipped()] == ["filco", "ralm", "riches"]


@pytest.mark.parametrize("profile", shipped(), ids=lambda p: p.name)
def test_a_builtin_conf_dir_is_set_and_inside_its_package(profile: MethodProfile):
    assert profile.conf_dir is not None
    package = Path(importlib.import_module(profile.packages[0]).__file__).resolve().parent
    conf = Path(profile.conf_dir).resolve()
    assert conf == package / "conf"
    # the method's experiments (mini and paper scale) live there, under the group name the
    # command line uses (experiment=<method>/<table>)
    assert sorted((conf / "experiment").iterdir()) == [conf / "experiment" / profile.name]
    assert list((conf / "experiment" / profile.name / "paper").glob("*.yaml"))
    assert conf in [Path(d).resolve() for d in conf_dirs()]


@pytest.mark.parametrize("profile", shipped(), ids=lambda p: p.name)
def test_the_cores_conf_holds_no_method_folder(profile: MethodProfile):
    for root in sorted(method_roots(profile)):
        for where in (CONF_DIR / root, CONF_DIR / "experiment" / root,
                      CONF_DIR / "report" / "tables" / root):
            assert not where.exists(), f"{where.relative_to(REPO_ROOT)} belongs to {profile.name}"
    assert not (CONF_DIR / "report" / "paper" / f"{profile.name}.yaml").exists()
    assert not list((CONF_DIR / "report" / "plots").glob(f"{profile.name}_*.yaml"))


def test_no_core_yaml_builds_a_method_packages_object():
    """A YAML of conf/ whose `_target_` is a method's code (FilCo's tiny T5 model) belongs in
    that method's folder."""
    packages = {pkg for p in shipped() for pkg in p.packages}
    found = []
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        target = data.get("_target_") if isinstance(data, dict) else None
        if isinstance(target, str) and target.split(".")[0] in packages:
            found.append(path.relative_to(CONF_DIR).as_posix())
    assert found == []


def test_the_core_keeps_only_shared_groups():
    groups = sorted(p.name for p in CONF_DIR.iterdir() if p.is_dir())
    assert groups == ["corpus", "dataset", "encoder", "experiment", "hydra", "model",
                      "rehearsal", "report", "retriever"]
    assert [p.name for p in (CONF_DIR / "experiment").iterdir()] == ["core"]
    assert sorted(p.name for p in SPEC_DIR.iterdir()) == [
        "dashboard.yaml", "flags.yaml", "samples.yaml", "verdict.yaml"]


def test_method_files_are_found_through_the_seam():
    """What used to be read from conf/ is found in the methods' folders: experiment and group
    options, the rehearsal's paper configs, table, plot and paper specs."""
    assert config_dirs()[0] == CONF_DIR
    experiments = group_options("experiment")
    assert {"core/smoke", "ralm/table1", "ralm/paper/fig4", "riches/main",
            "riches/paper/main", "filco/fig4", "filco/paper/table2"} <= set(experiments)
    assert option_file("experiment", "ralm/table1") == \
        REPO_ROOT / "ralm" / "conf" / "experiment" / "ralm" / "table1.yaml"
    assert option_file("model", "tiny-t5-random").parent == REPO_ROOT / "filco" / "conf" / "model"
    assert option_file("model", "smollm2-135m").parent == CONF_DIR / "model"
    assert group_options("ralm/rerank") == ["first", "gold", "none", "oracle", "predictive",
                                            "random", "zeroshot"]
    assert group_options("ralm/rerank", CONF_DIR) == []  # one folder when one is named
    # the rehearsal's paper configs: every method's, 13 + 4 + 6 of them
    papers = paper_experiments()
    assert len([e for e in papers if e.startswith("ralm/")]) == 13
    assert len([e for e in papers if e.startswith("riches/")]) == 4
    assert len([e for e in papers if e.startswith("filco/")]) == 6
    assert table_files()["ralm/table1"] == \
        REPO_ROOT / "ralm" / "conf" / "report" / "tables" / "ralm" / "table1.yaml"
    assert "filco/fig4" in result_spec_names() and "riches/main" in result_spec_names()
    assert sorted(plot_files()) == ["filco_fig6_input_length", "ralm_fig5_stride",
                                    "ralm_fig6_query_len", "ralm_fig7_oracle",
                                    "ralm_fig8_qa_docs", "riches_beam_autoais",
                                    "riches_beam_f1"]
    assert {k: v.relative_to(REPO_ROOT).as_posix() for k, v in paper_files().items()} == {
        m: f"{m}/conf/report/paper/{m}.yaml" for m in ("filco", "ralm", "riches")}
    with pytest.raises(Exception, match="Did you mean 'ralm/table1'"):
        option_file("experiment", "ralm/tabel1")


def test_a_wheel_carries_the_methods_conf_folders():
    """pyproject.toml declares each method's conf/**/*.yaml package data: a non-editable
    install has the folders the profiles' conf_dir point at (checked by building a wheel:
    see the task report; here the declaration)."""
    text = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    # the table's own lines (tomllib is Python 3.11+; the project supports 3.10)
    section = text.split("[tool.setuptools.package-data]\n", 1)[1].split("\n[", 1)[0]
    lines = {line.strip() for line in section.splitlines()}
    for profile in shipped():
        assert f'{profile.packages[0]} = ["conf/**/*.yaml"]' in lines, profile.name
