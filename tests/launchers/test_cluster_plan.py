"""Per-cell cluster requests, job-array grouping, launcher parameters and the W&B sweep group:
pure functions, checked against hand-computed values."""
import pytest

from ragrepro.cluster import (
    Resources,
    group_by_resources,
    model_size_b,
    resources_for,
    sweep_group,
)
from ragrepro.errors import ConfigError


def _cfg(model, scale="paper", dtype="float16", **resources):
    return {"model": {"name": model}, "scale": scale, "dtype": dtype, "device": "auto",
            "resources": {"gpus": "auto", "cpus": "auto", "mem_gb": "auto",
                          "timeout_min": "auto", "gpu_mem_gb": 80, **resources}}


@pytest.mark.parametrize("name,billions", [("opt-66b", 66.0), ("opt-125m", 0.125),
                                           ("opt-6.7b", 6.7), ("gpt-neo-1.3b", 1.3),
                                           ("llama-13b", 13.0), ("gpt2-xl", 1.56),
                                           ("smollm2-135m", 0.135)])
def test_model_size_from_name(name, billions):
    assert model_size_b({"name": name}) == pytest.approx(billions)


def test_params_b_wins_and_unknown_size_names_the_fix():
    assert model_size_b({"name": "my-model", "params_b": 7}) == 7.0
    with pytest.raises(ConfigError, match=r"params_b=<billions>.*resources.gpus"):
        model_size_b({"name": "my-model"})


def test_66b_asks_for_more_gpus_than_125m():
    # 66e9 params x 2 bytes x 1.2 = 158.4 GB -> 2 x 80 GB; host 66 x 2 x 1.5 = 198 GB
    assert resources_for(_cfg("opt-66b")) == Resources(gpus=2, cpus=8, mem_gb=198,
                                                       timeout_min=720)
    # 0.125e9 x 2 x 1.2 = 0.3 GB -> 1 GPU, 4 CPUs per GPU; host memory at least 8 GB
    assert resources_for(_cfg("opt-125m")) == Resources(gpus=1, cpus=4, mem_gb=8,
                                                        timeout_min=720)
    # float32 doubles the weights: 66 x 4 x 1.2 = 316.8 GB -> 4 GPUs; 40 GB GPUs -> 8
    assert resources_for(_cfg("opt-66b", dtype="float32")).gpus == 4
    assert resources_for(_cfg("opt-66b", gpu_mem_gb=40)).gpus == 4


def test_explicit_requests_win_and_mini_scale_is_cpu_only():
    got = resources_for(_cfg("opt-66b", gpus=8, cpus=32, mem_gb=500, timeout_min=60))
    assert got == Resources(gpus=8, cpus=32, mem_gb=500, timeout_min=60)
    assert resources_for(_cfg("smollm2-135m", scale="mini")) == Resources(0, 1, 4, 720)
    # at mini scale the size is never needed, so an unknown model is fine
    assert resources_for(_cfg("unknown-model", scale="mini", dtype="float64")).gpus == 0
    with pytest.raises(ConfigError, match="dtype='float64'"):
        resources_for(_cfg("opt-66b", dtype="float64"))


def test_cells_with_the_same_request_share_one_array():
    a, b = Resources(1, 4, 8, 720), Resources(2, 8, 198, 720)
    assert group_by_resources([a, b, a, a, b]) == {a: [0, 2, 3], b: [1, 4]}


def test_wandb_group_is_one_per_sweep():
    assert sweep_group("ralm/table1", "/x/multirun/ralm/table1/2026-01-01_10-00-00", None) \
        == "ralm/table1/sweep-2026-01-01_10-00-00"
    assert sweep_group("ralm/table1", None, None) == "ralm/table1"
    assert sweep_group("ralm/table1", "/x/sweep", "mine") == "mine"


def test_slurm_parameters_partition_account_and_per_cell_resources():
    from hydra_plugins.ragrepro_launchers.submitit_launcher import executor_params

    params = {"submitit_folder": "/s/%j", "partition": "gpu", "account": "lab", "qos": None,
              "gpus_per_node": None, "cpus_per_task": None, "mem_gb": None, "timeout_min": 0,
              "nodes": 1, "max_num_timeout": 3, "array_parallelism": 64}
    got = executor_params(params, Resources(2, 8, 198, 720), "slurm")
    assert got == {"slurm_partition": "gpu", "slurm_account": "lab", "gpus_per_node": 2,
                   "cpus_per_task": 8, "mem_gb": 198, "timeout_min": 720, "nodes": 1,
                   "slurm_array_parallelism": 64}
    # a value the user set on the launcher wins over the cell's estimate
    got = executor_params({**params, "gpus_per_node": 4, "timeout_min": 30},
                          Resources(2, 8, 198, 720), "slurm")
    assert got["gpus_per_node"] == 4 and got["timeout_min"] == 30


def test_ray_options_resources_and_forwarded_environment():
    from hydra_plugins.ragrepro_launchers._common import Cell
    from hydra_plugins.ragrepro_launchers.ray_launcher import (
        forwarded_env,
        init_options,
        remote_options,
    )

    cell = Cell(0, [], None, Resources(2, 8, 198, 720), finished=False)
    opts = remote_options({"num_cpus": "auto", "num_gpus": "auto", "max_retries": 3}, cell,
                          {"RAGREPRO_RESULTS": "/shared/results"})
    assert opts == {"num_cpus": 8, "num_gpus": 2, "max_retries": 3,
                    "runtime_env": {"env_vars": {"RAGREPRO_RESULTS": "/shared/results"}}}
    assert remote_options({"num_cpus": 1, "num_gpus": 0}, cell)["num_gpus"] == 0
    local = {"address": None, "num_cpus": 2, "include_dashboard": False}
    assert init_options(local) == {"num_cpus": 2, "include_dashboard": False}
    assert init_options({**local, "address": "auto"}) == {"address": "auto"}
    env = {"RAGREPRO_RESULTS": "/r", "WANDB_MODE": "offline", "WANDB_API_KEY": "k",
           "HF_TOKEN": "t", "HOME": "/root", "OMP_NUM_THREADS": "1"}
    assert forwarded_env(env) == {"RAGREPRO_RESULTS": "/r", "WANDB_MODE": "offline",
                                  "OMP_NUM_THREADS": "1"}
