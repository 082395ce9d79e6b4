"""Side-by-side lanes (ragrepro.lanes) and make reproduce-table1's lane plan (ralm.reproduce)."""
import sys
import time

import pytest
import torch

from ragrepro.errors import ConfigError
from ragrepro.lanes import Lane, cells, check_cover, lane_commands, run_lanes


def test_the_table1_lanes_run_every_cell_of_its_sweep_once():
    from ralm.reproduce import LANES, sweep_params

    sweep = sweep_params("ralm/table1")
    assert len(cells(sweep)) == 12
    check_cover(sweep, LANES["ralm/table1"])  # raises if a cell is missing or twice
    lane1 = LANES["ralm/table1"][0]
    # the reranker is trained first, and zero-shot and oracle share one process
    assert lane1[0]["ralm/rerank"].split(",")[:1] == ["predictive"]
    gemma = LANES["ralm/table1"][1][0]["ralm/rerank"].split(",")
    assert gemma[-1] == "predictive"  # last: by then lane 1 has trained the reranker
    assert gemma.index("oracle") == gemma.index("zeroshot") + 1


def test_cover_errors_name_the_cells():
    sweep = {"model": "a,b", "r": "x,y"}
    with pytest.raises(ConfigError, match=r"missing: model=b r=y; twice: model=a r=x"):
        check_cover(sweep, [[{"model": "a", "r": "x,y"}], [{"model": "a,b", "r": "x"}]])
    with pytest.raises(ConfigError, match="not in the sweep: model=c r=x"):
        check_cover(sweep, [[{"model": "a,b,c", "r": "x,y"}]])
    with pytest.raises(ConfigError, match="every lane sweep the experiment's keys"):
        check_cover(sweep, [[{"model": "a,b"}]])


def test_each_sweep_gets_its_own_hydra_folder():
    lanes = lane_commands(["ragrepro"], "ralm/table1",
                          [[{"model": "a"}], [{"model": "b"}, {"model": "c"}]], ["x=1"], "T_")
    dirs = [c[-1] for lane in lanes for c in lane.commands]
    assert len(set(dirs)) == 3 and all(d.startswith("hydra.sweep.dir=") for d in dirs)
    assert lanes[1].commands[1][:5] == ("ragrepro", "-m", "experiment=ralm/table1", "model=c",
                                        "x=1")


def _py(code: str) -> tuple[str, ...]:
    return (sys.executable, "-c", code)


def test_lanes_run_side_by_side_with_one_thread_and_report_failures(tmp_path, capsys):
    stamp = "import os,time; print('threads', os.environ['OMP_NUM_THREADS']); "
    slow = stamp + "t=time.time(); time.sleep(1.0); print('start', t)"
    lanes = [Lane("lane 1", (_py(slow),)),
             Lane("lane 2", (_py(slow), _py("import sys; print('a\\rb'); sys.exit(3)"),
                             _py("print('never')")))]
    t0 = time.perf_counter()
    codes = run_lanes(lanes, tmp_path / "logs", threads=1)
    took = time.perf_counter() - t0
    assert codes == {"lane 1": 0, "lane 2": 3}
    assert took < 2.0 + 1.5  # side by side: both 1 s sleeps overlap (lane 2's second is fast)
    err = capsys.readouterr().err
    assert "[lane 1] threads 1" in err and "[lane 2] b" in err and "never" not in err
    log2 = (tmp_path / "logs" / "lane2.log").read_bytes().decode()
    assert log2.count("$ ") == 2 and "a\rb" in log2  # the full output, commands included


@pytest.mark.slow
def test_one_and_two_threads_give_the_same_bits(smollm, gemma):
    """Why two one-thread lanes print the same numbers as one two-thread sweep."""
    g = torch.Generator().manual_seed(0)
    for lm in (smollm, gemma):
        ids = torch.randint(5, 20000, (4, 160), generator=g)
        mask = torch.ones_like(ids)
        mask[1, :30] = 0
        before = torch.get_num_threads()
        outs = []
        try:
            for n in (1, 2):
                torch.set_num_threads(n)
                with torch.no_grad():
                    outs.append(lm.model(input_ids=ids, attention_mask=mask).logits)
        finally:
            torch.set_num_threads(before)
        assert torch.equal(outs[0], outs[1]), lm.name


def test_reproduce_reads_its_options_and_hands_the_rest_to_every_sweep(monkeypatch):
    from ralm import reproduce

    a, extra = reproduce.parse(["ralm/table1", "--lanes", "2", "--", "wandb.mode=disabled"])
    assert (a.experiment, a.lanes, extra) == ("ralm/table1", 2, ["wandb.mode=disabled"])
    a, extra = reproduce.parse(["--lanes", "1"])
    assert (a.experiment, a.lanes, extra) == ("ralm/table1", 1, [])
    sent = {}
    monkeypatch.setattr(reproduce, "run_lanes", lambda lanes, log_dir, threads, cwd: sent.update(
        lanes=lanes, threads=threads) or {lane.name: 0 for lane in lanes})
    monkeypatch.setattr(reproduce.table1, "main", lambda argv: sent.update(table=argv))
    monkeypatch.setattr(reproduce.os, "cpu_count", lambda: 2)
    assert reproduce.main(["--", "wandb.mode=disabled"]) == 0
    assert sent["threads"] == 1 and sent["table"] == ["ralm/table1"]
    assert [len(lane.commands) for lane in sent["lanes"]] == [1, 2]
    assert all("wandb.mode=disabled" in c for lane in sent["lanes"] for c in lane.commands)
    with pytest.raises(ConfigError, match="No lane plan for 'ralm/fig5'"):
        reproduce.plan("ralm/fig5", 2, [], "")
