"""Where the loaders find hub models, hub dataset rows and prebuilt indexes: one installed
resolver, the production one unless a mode (the rehearsal, a test) installs its own.

The loaders (`models.loading.resolve_source`, `data.hub`, `retrieval.bm25`, `lock`) ask
`current()`; a resolver answers with a local substitute or None ("load the real thing").
Production code never imports the modules that install other resolvers: the rehearsal
(`ragrepro.rehearsal`, chosen by the config group `rehearsal=cpu`) installs its own when
the runner calls the hook its config names. This module sits below every loader and
imports nothing of the project."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Protocol

log = logging.getLogger(__name__)


class SourceResolver(Protocol):
    """Local substitutes for what a real run downloads; None means "the real one"."""

    name: str

    def model_source(self, source: str) -> str | None:
        """A local folder that from_pretrained loads instead of the hub id `source`."""

    def hub_file(self, repo: str, config: str | None, split: str) -> Path | None:
        """A JSON-lines file holding the rows of hub dataset (repo, config, split)."""

    def prebuilt_index(self, name: str) -> Path | None:
        """A Lucene index folder standing in for the pyserini prebuilt index `name`."""


class HubSources:
    """Production: every hub model, dataset and prebuilt index is the real one."""

    name = "hub"

    def model_source(self, source: str) -> str | None:
        return None

    def hub_file(self, repo: str, config: str | None, split: str) -> Path | None:
        return None

    def prebuilt_index(self, name: str) -> Path | None:
        return None


PRODUCTION: SourceResolver = HubSources()
_CURRENT: list[SourceResolver] = [PRODUCTION]


def current() -> SourceResolver:
    """The resolver the loaders ask now."""
    return _CURRENT[0]


def install(resolver: SourceResolver) -> None:
    """Route every later load through `resolver` (until `reset`)."""
    if resolver is not _CURRENT[0]:
        log.info("Source resolver: %s", resolver.name)
    _CURRENT[0] = resolver


def reset() -> None:
    """Back to the production resolver."""
    _CURRENT[0] = PRODUCTION


def substituted() -> bool:
    """Whether a resolver other than the production one is installed."""
    return _CURRENT[0] is not PRODUCTION
