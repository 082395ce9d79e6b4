"""The loaders' source resolver (ragrepro.sources): production answers "the real one", the
rehearsal installs its own through the runner's hook, and run ids ignore the hook's name."""
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from ragrepro import rehearsal, sources
from ragrepro.data import hub
from ragrepro.errors import ConfigError
from ragrepro.models.loading import resolve_source
from ragrepro.paths import CONF_DIR
from ragrepro.rehearsal import RehearsalSources
from ragrepro.rehearsal.fixtures import hub_file
from ragrepro.runner import _enter_rehearsal
from ragrepro.tracking import run_id_of


@pytest.fixture(autouse=True)
def _production_after(monkeypatch):
    monkeypatch.delenv("RAGREPRO_DATA", raising=False)  # activate() sets it
    yield
    sources.reset()


def test_the_production_resolver_substitutes_nothing(tmp_path):
    resolver = sources.current()
    assert resolver is sources.PRODUCTION and not sources.substituted()
    assert resolver.model_source("facebook/opt-66b") is None
    assert resolver.hub_file("nq_open", None, "validation") is None
    assert resolver.prebuilt_index("wikipedia-dpr") is None
    assert resolve_source(str(tmp_path)) == (str(tmp_path), True)


def test_activate_installs_the_rehearsal_resolver_and_deactivate_removes_it(tmp_path):
    rehearsal.activate(tmp_path)
    resolver = sources.current()
    assert isinstance(resolver, RehearsalSources) and sources.substituted()
    assert rehearsal.root() == tmp_path
    assert resolver.prebuilt_index("wikipedia-dpr") == tmp_path / "index" / "wikipedia-dpr"
    assert resolver.prebuilt_index("msmarco-v1-passage") is None  # no stand-in: real path
    assert resolver.hub_file("nq_open", None, "validation") == \
        hub_file(tmp_path, "nq_open", None, "validation")
    assert resolver.model_source("embedded:smollm2") is None  # local models stay
    assert resolver.model_source(str(tmp_path)) is None
    rehearsal.deactivate()
    assert sources.current() is sources.PRODUCTION and not rehearsal.is_active()


def test_hub_rows_come_from_the_installed_resolver(tmp_path):
    """data.hub asks the resolver, never the rehearsal: any resolver's file is read."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"question": "q1", "answer": ["a1"]}\n', encoding="utf-8")

    class OneFile:
        name = "test"

        def model_source(self, source):
            return None

        def hub_file(self, repo, config, split):
            return rows

        def prebuilt_index(self, name):
            return None

    sources.install(OneFile())
    got = hub._load_hub_rows("someone/qa", None, "validation", "instead")
    assert [dict(r) for r in got] == [{"question": "q1", "answer": ["a1"]}]


def _compose(*overrides):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def test_the_runner_enters_the_rehearsal_through_the_configured_hook(tmp_path, monkeypatch):
    monkeypatch.setenv("RAGREPRO_RESULTS", str(tmp_path / "results"))
    cfg = _compose("experiment=ralm/paper/fig4", "rehearsal=cpu",
                   f"rehearsal.fixtures={tmp_path / 'fx'}")
    assert cfg.rehearsal.setup == "ragrepro.rehearsal.enter"
    _enter_rehearsal(cfg)
    assert isinstance(sources.current(), RehearsalSources)
    assert rehearsal.root() == tmp_path / "fx"
    assert cfg.results_dir == str(tmp_path / "results" / "rehearsal") and cfg.device == "cpu"


def test_a_rehearsal_without_a_hook_is_a_clear_error():
    cfg = OmegaConf.create({"rehearsal": {"enabled": True, "setup": None}})
    with pytest.raises(ConfigError, match="rehearsal=cpu"):
        _enter_rehearsal(cfg)
    cfg = OmegaConf.create({"rehearsal": {"enabled": True, "setup": "ragrepro.nowhere.enter"}})
    with pytest.raises(ConfigError, match="cannot be imported"):
        _enter_rehearsal(cfg)


def test_the_hook_name_leaves_run_ids_as_they_were():
    """Rehearsal rows written before `rehearsal.setup` existed keep their ids."""
    before = {"name": "x", "seed": 0, "rehearsal": {"enabled": True, "max_new_tokens": 16}}
    now = {**before, "rehearsal": {**before["rehearsal"], "setup": "ragrepro.rehearsal.enter"}}
    other = {**before, "rehearsal": {**before["rehearsal"], "setup": "mine.enter"}}
    assert run_id_of(now) == run_id_of(before)
    assert run_id_of(other) != run_id_of(before)

