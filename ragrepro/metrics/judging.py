"""Attribution that does not hold decoding hostage: judge now, or record why not and judge
later with `ragrepro judge <experiment>`.

A pipeline whose attribution judge cannot load yet (an opt-in model whose weights are not
installed) runs and records everything else; it leaves the attribution columns empty, puts
the reason in the row (`autoais_status`) and writes the judge's options to `judge.json` in the
run folder. `ragrepro judge <experiment>` later reads each such run's samples and fills the
columns in: metrics.json, autoais.jsonl and the CSV row. A judge is never swapped silently: the
command uses the recorded judge unless one is named on its command line, and the row names
the judge that scored it (`autoais_scorer`, `autoais_judge_accuracy`).

The samples' generic fields the judge reads: `qid`, `question`, `prediction` (the answer) and
`evidence` (the premise text). The core knows no method names.

    ragrepro judge <experiment> [judge_model=<conf/model name>|null] [judge_threshold=<x>|null]
                   [results_dir=<dir>] [force=true]
"""
from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from hydra.utils import instantiate
from omegaconf import OmegaConf

from .. import ladder
from ..configcheck import group_options
from ..errors import ConfigError, did_you_mean
from ..io import atomic_write_json, atomic_write_text
from ..paths import CONF_DIR, results_dir
from ..run_files import read_metrics, read_records, read_run_json
from ..tracking import Run, append_csv_row, csv_row
from .autoais import AttributionItem, AutoAIS, load_autoais

log = logging.getLogger(__name__)

JUDGE_FILE = "judge.json"     # in a run folder: the judge's options and whether it has run
JUDGED, PENDING = "judged", "pending"


# -- what a judge needs, as plain data ------------------------------------------------------
def plain(value: Any) -> Any:
    """A judge option as JSON data: a Hydra partial becomes its config (`_target_`,
    `_partial_: true` and its arguments), so `load_autoais` can rebuild it later."""
    if isinstance(value, functools.partial):
        fn = value.func
        return {"_target_": f"{fn.__module__}.{fn.__qualname__}", "_partial_": True,
                **{k: plain(v) for k, v in value.keywords.items()}}
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def missing_judge(options: Mapping[str, Any]) -> str | None:
    """Why the judge of `options` (load_autoais arguments) cannot load on this machine, or
    None. Only opt-in ladder weights are checked: they are the one judge a fresh clone lacks."""
    options = plain(options)
    node = options.get("judge_model") if options.get("backend") == "llm-judge" else None
    source = str((node or {}).get("source") or "") if isinstance(node, Mapping) else ""
    name = source.removeprefix("embedded:")
    if source.startswith("embedded:") and name in ladder.LADDER and not ladder.installed(name):
        return f"judge {name} not installed"
    return None


def pending_status(reason: str, experiment: str) -> str:
    return (f"{reason}: run make setup-ladder, then ragrepro judge {experiment} (or name a "
            f"judge: ragrepro judge {experiment} judge_model=<conf/model name>)")


def attribution_items(samples: Sequence[Mapping[str, Any]]) -> list[AttributionItem]:
    return [AttributionItem(question=s["question"], answer=s.get("prediction"), title=None,
                            passage=s.get("evidence")) for s in samples]


def judge_samples(judge: AutoAIS, samples: Sequence[Mapping[str, Any]]
                  ) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(metrics, row settings, per-sample lines of autoais.jsonl) of one run's samples."""
    res = judge.evaluate(attribution_items(samples))
    metrics = dict(res.metrics)
    # the mean calibrated score, a missing answer or passage counting 0 (RICHES app. 10.2)
    metrics[f"{judge.result_key}_mean_score"] = soft_score(res.per_sample)
    settings = dict(res.settings)
    # the metric is also called autoais_substitute: keep the scorer's name in its own column
    if "autoais_substitute" in settings:
        settings["autoais_scorer"] = settings.pop("autoais_substitute")
    lines = [{"qid": s["qid"], **p} for s, p in zip(samples, res.per_sample)]
    return metrics, settings, lines


def soft_score(per_sample: Sequence[Mapping[str, Any]]) -> float:
    """Mean NLI score over all questions, a missing prediction or passage counting 0."""
    if not per_sample:
        return float("nan")
    return float(np.mean([p.get("nli_score") or 0.0 for p in per_sample]))


def write_scores(path: Path, lines: Sequence[Mapping[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(dict(x), default=float) + "\n" for x in lines))


def write_judge_file(run_dir: Path, options: Mapping[str, Any], status: str,
                     reason: str | None = None) -> None:
    atomic_write_json(run_dir / JUDGE_FILE, {"options": plain(options), "status": status,
                                             "reason": reason})


# -- ragrepro judge <experiment> -------------------------------------------------------------
def parse_args(argv: Sequence[str]) -> tuple[str, dict[str, str]]:
    if not argv or "=" in argv[0]:
        raise ConfigError("usage: ragrepro judge <experiment> [judge_model=<name>|null] "
                          "[judge_threshold=<x>|null] [results_dir=<dir>] [force=true]")
    known = ("judge_model", "judge_threshold", "results_dir", "force")
    args: dict[str, str] = {}
    for a in argv[1:]:
        key, sep, value = a.partition("=")
        if not sep or key not in known:
            raise ConfigError(f"ragrepro judge: unknown argument {a!r}; use {known}.")
        args[key] = value
    return argv[0], args


def model_node(name: str, run_config: Mapping[str, Any]) -> dict[str, Any]:
    """conf/model/<name>.yaml as a partial, its ${dtype}/${device} taken from the run."""
    path = CONF_DIR / "model" / f"{name}.yaml"
    if not path.exists():
        raise ConfigError(f"judge_model={name!r}: no conf/model/{name}.yaml.")
    root = OmegaConf.create({k: run_config.get(k) for k in ("dtype", "device",
                                                            "attn_implementation")})
    root.judge = OmegaConf.load(path)
    node = OmegaConf.to_container(root, resolve=True)["judge"]
    return {**node, "_partial_": True}


def judge_options(recorded: Mapping[str, Any], args: Mapping[str, str],
                  run_config: Mapping[str, Any]) -> dict[str, Any]:
    """The recorded judge options with the command line's judge_model/judge_threshold."""
    options = dict(recorded)
    if "judge_model" in args:
        name = args["judge_model"]
        options["judge_model"] = None if name == "null" else model_node(name, run_config)
    if "judge_threshold" in args:
        t = args["judge_threshold"]
        options["judge_threshold"] = None if t == "null" else float(t)
    return options


def judge_run(run_dir: Path, args: Mapping[str, str]) -> bool:
    """Judge one finished run folder whose judge is pending (or any, with force=true);
    returns whether it was judged."""
    spec_path = run_dir / JUDGE_FILE
    spec = read_run_json(spec_path, {"options": dict})  # damage: DataError naming the file
    if spec.get("status") == JUDGED and args.get("force") != "true":
        return False
    run_config = read_run_json(run_dir / "config.json")
    options = judge_options(spec["options"], args, run_config)
    reason = missing_judge(options)
    if reason:
        raise ConfigError(f"{run_dir}: {reason}: run `make setup-ladder`, or name a judge "
                          f"(judge_model=<conf/model name>; judge_model=null: the run's own LM).")
    own_lm = instantiate(run_config["model"]) if options.get("judge_model") is None else None
    judge = load_autoais(lm=own_lm, **options)
    samples = read_records(run_dir / "samples.jsonl", finished=True)
    metrics, settings, lines = judge_samples(judge, samples)
    write_scores(run_dir / "autoais.jsonl", lines)
    settings["autoais_status"] = f"{JUDGED} later (ragrepro judge)"
    update_results(run_dir, metrics, settings)
    write_judge_file(run_dir, options, JUDGED)
    log.info("Judged %s: %s", run_dir, {k: v for k, v in metrics.items()})
    return True


def update_results(run_dir: Path, metrics: Mapping[str, Any],
                   settings: Mapping[str, Any]) -> None:
    """Merge the judge's numbers into metrics.json, then replace the run's CSV row."""
    path = run_dir / "metrics.json"
    data = read_metrics(path)
    finished_at = path.stat().st_mtime
    data["metrics"] = {**data.get("metrics", {}), **metrics}
    data["settings"] = {**data.get("settings", {}), **settings}
    atomic_write_json(path, data)
    run = Run(data["experiment"], data["run_id"], run_dir.parents[len(Path(data["experiment"]).parts)],
              timings=dict(data.get("timings_s") or {}))
    append_csv_row(run.csv_path, csv_row(run, data["metrics"], data["settings"],
                                         dict(data.get("metadata") or {}), finished_at))


def main(argv: Sequence[str]) -> None:
    judge_experiment(argv)  # a ConfigError: `error: ...` and exit 2 (ragrepro.cli)


def judge_experiment(argv: Sequence[str]) -> None:
    experiment, args = parse_args(argv)
    root = Path(args.get("results_dir") or results_dir())
    folder = root / experiment
    runs = sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("tmp_")
                  and (p / JUDGE_FILE).exists()) if folder.is_dir() else []
    if not runs:
        raise ConfigError(f"No finished run with a recorded judge under {folder}."
                          f"{did_you_mean(experiment, group_options('experiment'))}")
    done = sum(judge_run(p, args) for p in runs)
    log.info("ragrepro judge %s: %d of %d runs judged (%s)", experiment, done, len(runs),
             time.strftime("%Y-%m-%d %H:%M:%S"))
