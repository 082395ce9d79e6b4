"""The core pipeline contract: Hydra builds the pipeline and its components, the runner calls
`pipeline(run=run)`; legacy `fn(cfg, run)` targets are listed until they are converted."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from omegaconf import OmegaConf

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


def _experiment_targets() -> dict[str, str]:
    out = {}
    for path in sorted((CONF / "experiment").rglob("*.yaml")):
        node = OmegaConf.load(path)
        target = OmegaConf.select(node, "pipeline._target_")
        if target:
            out[str(path.relative_to(CONF / "experiment"))] = str(target)
    return out


# Experiments whose pipeline still takes the whole config: none left since issue 15.
LEGACY_TARGETS: set[str] = set()


def test_legacy_targets_only_shrink():
    from hydra.utils import get_object

    legacy = {t for t in set(_experiment_targets().values()) if is_legacy(get_object(t))}
    assert legacy <= LEGACY_TARGETS, f"new legacy pipelines: {legacy - LEGACY_TARGETS}"
    assert LEGACY_TARGETS <= legacy, f"converted, remove from LEGACY_TARGETS: {LEGACY_TARGETS - legacy}"


def test_unknown_settings_key_is_a_config_error():
    cfg = _cfg()
    cfg.settings.scael = 1.0  # a misspelt key must not be ignored
    with pytest.raises(ConfigError, match="scael"):
        build_pipeline(cfg)


def test_renamed_groups_are_checked_before_loading():
    from ragrepro.configcheck import check_overrides

    with pytest.raises(ConfigError, match="Did you mean 'smollm2-135m'"):
        check_overrides(["scorer=smolm2"])
    with pytest.raises(ConfigError, match="Unknown riches/method 'dense'"):
        check_overrides(["riches/method=riches,dense"])
    check_overrides(["riches/method=riches,iterative", "scorer=self"])
