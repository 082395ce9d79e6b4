"""Two processes needing one model: the second waits for the first's build and reuses it."""
import fcntl
import logging
import threading
import time

from ragrepro.io import locked


def test_a_second_builder_waits_says_so_and_then_proceeds(tmp_path, caplog):
    target = tmp_path / "reranker" / "abc"
    events = []
    held = threading.Event()

    def first_builder():
        with locked(target):
            held.set()
            time.sleep(0.3)
            target.mkdir(parents=True)
            (target / "model.safetensors").write_text("weights")
            events.append("built")

    t = threading.Thread(target=first_builder)
    t.start()
    held.wait(5)
    with caplog.at_level(logging.INFO, logger="ragrepro.io"), locked(target, waiting="waiting"):
        # inside the lock the first builder's model is complete: nothing to train again
        events.append("second sees " + str((target / "model.safetensors").exists()))
    t.join()
    assert events == ["built", "second sees True"]
    assert [r.getMessage() for r in caplog.records] == ["waiting"]


def test_an_uncontended_lock_logs_nothing(tmp_path, caplog):
    with (caplog.at_level(logging.INFO, logger="ragrepro.io"),
          locked(tmp_path / "x", waiting="waiting"),
          open(tmp_path / "x.lock", "a") as other):  # held: another open cannot take it
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            taken = True
        except BlockingIOError:
            taken = False
    assert taken is False and caplog.records == []
