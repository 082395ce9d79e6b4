"""The core pipeline contract: Hydra builds the pipeline and its components, the runner calls
`pipeline(run=run)`; every experiment's pipeline is typed (no `fn(cfg, run)` left)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ragrepro.configcheck import group_options
from ragrepro.errors import ConfigError
from ragrepro.pipeline import Result, build_pipeline, is_legacy, pipeline_callable
from ragrepro.tracking import Run, run_id_of

CONF = Path(__file__).resolve().parents[2] / "conf"


@dataclass
class ToySettings:
    scale: float = 2.0


def toy_records(n: int) -> list[int]:
    return list(range(n))


def toy_pipeline(run: Run, *, records: list[int], settings: ToySettings) -> Result:
    return Result({"total": sum(records) * settings.scale}, {"n": len(records)})


def _cfg(**pipeline):
    return OmegaConf.create({
        "dataset": {"_target_": f"{__name__}.toy_records", "n": 4},
        "settings": {"_target_": f"{__name__}.ToySettings", "scale": 3.0},
        "pipeline": {"_target_": f"{__name__}.toy_pipeline", "_partial_": True,
                     "records": "${dataset}", "settings": "${settings}", **pipeline}})


def test_typed_pipeline_receives_built_components(tmp_path):
    pipeline = build_pipeline(_cfg())
    result = pipeline(run=Run("toy", "x", tmp_path))
    assert result.metrics == {"total": (0 + 1 + 2 + 3) * 3.0}
    assert result.settings == {"n": 4}


def test_run_id_hashes_pipeline_by_target_only():
    a = OmegaConf.to_container(_cfg(), resolve=True)
    b = {**a, "pipeline": {"_target_": a["pipeline"]["_target_"]}}
    assert run_id_of(a) == run_id_of(b)
    c = {**a, "dataset": {**a["dataset"], "n": 5}}
    assert run_id_of(c) != run_id_of(a)


def test_bad_target_is_refused_with_the_fix():
    with pytest.raises(ConfigError, match="cannot be imported"):
        pipeline_callable(OmegaConf.create({"pipeline": {"_target_": "nope.missing.run"}}))
    with pytest.raises(ConfigError, match="no `pipeline._target_`"):
        pipeline_callable(OmegaConf.create({}))


def test_legacy_detection():
    def old(cfg, run):
        return None

    assert is_legacy(old) and not is_legacy(toy_pipeline)


def _experiment_names() -> list[str]:
    return group_options("experiment")  # conf/ and every method's conf folder


def test_every_experiment_composes_to_a_typed_pipeline():
    from hydra import compose, initialize_config_dir

    targets = {}
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        for name in _experiment_names():
            cfg = compose(config_name="config", overrides=[f"experiment={name}"])
            targets[name] = pipeline_callable(cfg)
    legacy = sorted(n for n, fn in targets.items() if is_legacy(fn))
    assert len(targets) >= 40 and not legacy, f"pipelines taking the whole config: {legacy}"


def test_a_legacy_target_is_refused_with_the_fix():
    cfg = OmegaConf.create({"pipeline": {"_target_": f"{__name__}.old_style"}})
    with pytest.raises(ConfigError, match="takes the whole config"):
        build_pipeline(cfg)


def old_style(cfg, run):
    return None


def test_renamed_groups_are_checked_before_loading():
    from ragrepro.configcheck import check_overrides

    with pytest.raises(ConfigError, match="Did you mean 'smollm2-135m'"):
        check_overrides(["scorer=smolm2"])
    with pytest.raises(ConfigError, match="Unknown riches/method 'dense'"):
        check_overrides(["riches/method=riches,dense"])
    check_overrides(["riches/method=riches,iterative", "scorer=self"])


def test_missing_ladder_weights_are_refused_before_the_run(tmp_path, monkeypatch):
    from ragrepro import ladder
    from ragrepro.configcheck import check_ladder_weights

    monkeypatch.setattr(ladder, "installed", lambda name: False)
    # a missing judge does not stop the run: it decodes, and `ragrepro judge` judges later
    judge = {"riches": {"autoais": {"enabled": True,
                                    "judge_model": {"source": "embedded:qwen2.5-coder-1.5b"}}}}
    check_ladder_weights(OmegaConf.create(judge))
    with pytest.raises(ConfigError, match="model=smollm2-135m"):
        check_ladder_weights(OmegaConf.create({"model": {"source": "embedded:qwen2.5-coder-0.5b"}}))
    check_ladder_weights(OmegaConf.create({"model": {"source": "embedded:smollm2"}}))
