"""The scontrol watcher's poll cap (hydra_plugins/ragrepro_launchers/_slurm_watch.py): from
RAGREPRO_SLURM_POLL_S, default submitit's 60 s, a bad value refused by name."""
import pytest

from hydra_plugins.ragrepro_launchers._slurm_watch import POLL_ENV, expand_tasks, poll_cap_s
from ragrepro.errors import ConfigError


def test_poll_cap_defaults_to_submitits_sixty_seconds(monkeypatch):
    monkeypatch.delenv(POLL_ENV, raising=False)
    assert poll_cap_s() == 60.0
    monkeypatch.setenv(POLL_ENV, "2")
    assert poll_cap_s() == 2.0


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "nan"])
def test_a_bad_poll_cap_names_the_variable(monkeypatch, raw):
    monkeypatch.setenv(POLL_ENV, raw)
    with pytest.raises(ConfigError, match=r"RAGREPRO_SLURM_POLL_S=.*positive number"):
        poll_cap_s()


def test_the_watcher_reads_states_within_the_cap(monkeypatch):
    """submitit's back-off (age / 2, at least 2 s) capped by delay_s: with a 2 s cap a job
    that has run 30 s is looked at every 2 s, not every 15 s."""
    from hydra_plugins.ragrepro_launchers._slurm_watch import _watcher_class

    calls = []
    watcher = _watcher_class()(delay_s=2)
    monkeypatch.setattr(watcher, "update", lambda: calls.append(1))
    clock = {"t": 1000.0}
    monkeypatch.setattr("submitit.core.core._time.time", lambda: clock["t"])
    watcher._start_time, watcher._last_status_check = 970.0, 997.5  # 30 s old, read 2.5 s ago
    watcher.update_if_long_enough("standard")
    assert calls == [1]
    wide = _watcher_class()(delay_s=60)
    monkeypatch.setattr(wide, "update", lambda: calls.append(2))
    wide._start_time, wide._last_status_check = 970.0, 997.5
    wide.update_if_long_enough("standard")
    assert calls == [1]  # 2.5 s < 15 s: the default waits


def test_array_task_lists_expand():
    assert expand_tasks("0-2,5%4") == ["0", "1", "2", "5"]
