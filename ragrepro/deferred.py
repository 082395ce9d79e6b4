"""A component handed to a pipeline unbuilt, so that a cell which does not need it pays nothing.

A pipeline node names every component it may use; some are costly and only some cells use them
(the retriever of a no-retrieval cell, a second scoring model, the reranker's labelling model).
Hydra builds this wrapper instead of the component (`_recursive_: false` keeps the inner
`_target_` unbuilt and hands over the resolved config):

    scorer:
      _target_: ragrepro.deferred.Deferred
      _recursive_: false
      node: ${oc.select:scorer,null}     # a model config, or null when none is chosen

and the pipeline calls `scorer.build()` when, and only when, it needs the model.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf


class Deferred:
    """A config node with a `_target_`, instantiated on `build()` (each call builds anew)."""

    def __init__(self, node: Mapping[str, Any] | DictConfig | None = None):
        if isinstance(node, DictConfig):
            node = OmegaConf.to_container(node, resolve=True)  # type: ignore[assignment]
        self.config: dict[str, Any] | None = dict(node) if node is not None else None

    def __bool__(self) -> bool:
        return self.config is not None

    @property
    def name(self) -> str | None:
        return None if self.config is None else self.config.get("name")

    def build(self, **kwargs: Any) -> Any:
        """The component, with `kwargs` added to (or replacing) the config's arguments."""
        if self.config is None:
            raise ValueError("Deferred.build() on an empty node: check `if deferred:` first.")
        return instantiate(self.config, _convert_="all", **kwargs)

    def __repr__(self) -> str:
        return f"Deferred({self.name or (self.config or {}).get('_target_')})"
