"""Hydra launchers for clusters: the stock Slurm (submitit) and Ray launchers, plus
per-cell resource requests from the experiment config and skipping of finished cells.
Selected in conf/hydra/launcher/{slurm,submitit_local_cells,ray}.yaml through `_target_`.
Hydra only instantiates launchers that live under `hydra_plugins`, hence this package.
Its modules import ray and submitit only when a sweep is launched."""
