"""Rehearsal mode: run a paper-scale config on CPU with tiny stand-ins for the hub weights,
hub-schema fixtures for the hub datasets and a small Lucene index for `wikipedia-dpr`.

Switched on by the config group `rehearsal=cpu` (conf/rehearsal/cpu.yaml), whose
`rehearsal.setup` names `enter` below: the runner calls it, and it builds the fixtures,
installs `RehearsalSources` as the loaders' source resolver (ragrepro.sources) and points
the config at the fixtures. Production code never imports this package; everything else,
loaders, converters, pipelines, metrics, rows, runs as in a real run. See docs/rehearsal.md."""
from __future__ import annotations

import logging
import os
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from .. import sources
from ..data.records import Passage
from ..io import locked
from ..methods import registered
from ..paths import cache_dir
from ..retrieval.bm25 import build_lucene_index
from ..retrieval.corpus import corpus_from_passages, read_dpr_tsv
from . import fixtures
from .config import apply
from .standins import needs_standin, standin_dir

log = logging.getLogger(__name__)

FIXTURES_VERSION = 5
PREBUILT = {"wikipedia-dpr": "index/wikipedia-dpr"}


class RehearsalSources:
    """The loaders' resolver while rehearsing: stand-in folders for hub models, fixture rows
    in the hub layout for hub datasets, the fixture index for prebuilt indexes."""

    name = "rehearsal"

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def model_source(self, source: str) -> str | None:
        """The stand-in folder for a hub id (built once in the cache); None for local ones."""
        return str(standin_dir(source, cache_dir())) if needs_standin(source) else None

    def hub_file(self, repo: str, config: str | None, split: str) -> Path | None:
        return fixtures.hub_file(self.root, repo, config, split)

    def prebuilt_index(self, name: str) -> Path | None:
        return self.root / PREBUILT[name] if name in PREBUILT else None


def is_active() -> bool:
    return isinstance(sources.current(), RehearsalSources)


def activate(root: Path) -> None:
    """Route hub models, datasets and prebuilt indexes to `root` (built by `ensure_fixtures`)."""
    sources.install(RehearsalSources(root))
    # DPR-format QA files default to ${oc.env:RAGREPRO_DATA,data}/dpr/...: the fixtures.
    os.environ["RAGREPRO_DATA"] = str(root)
    log.warning("REHEARSAL mode: stand-in models and fixture data from %s; numbers are "
                "meaningless", root)


def deactivate() -> None:
    if is_active():
        sources.reset()


def root() -> Path:
    if not is_active():
        raise RuntimeError("rehearsal mode is not active")
    return sources.current().root  # type: ignore[attr-defined]


def enter(cfg: DictConfig, results: Path) -> None:
    """The runner's hook (`rehearsal.setup`): fixtures built, resolver installed, `cfg`
    pointed at the fixtures and results/rehearsal/ (in place); locations only."""
    given = OmegaConf.select(cfg, "rehearsal.fixtures", default=None)
    fixture_root = Path(str(given)) if given else ensure_fixtures()
    activate(fixture_root)
    apply(cfg, fixture_root, results)


def ensure_fixtures(base: Path | None = None) -> Path:
    """Build the fixture tree once (files, then the Lucene index) and return its root."""
    out = (base or cache_dir()) / f"rehearsal-fixtures-v{FIXTURES_VERSION}"
    with locked(out):
        if not (out / "done").exists():
            out.mkdir(parents=True, exist_ok=True)
            titles = [t for p in registered() if p.rehearsal.fixture_titles is not None
                      for t in p.rehearsal.fixture_titles()]
            fixtures.write_fixtures(out, fixtures.fixture_articles(extra_titles=titles))
            build_fixture_index(out)
            (out / "done").write_text("ok\n")
    return out


def build_fixture_index(root_dir: Path) -> Path:
    """A Lucene index of the fixture DPR TSV with pyserini's wikipedia-dpr raw layout
    (contents = '"Title"\\ntext'), so the prebuilt-index code path reads it."""
    quoted = [Passage(pid=p.pid, title=f'"{p.title}"', text=p.text)
              for p in read_dpr_tsv(root_dir / "dpr" / "psgs_w100.tsv")]
    return build_lucene_index(corpus_from_passages("wikipedia-dpr-fixture", quoted),
                              out=root_dir / PREBUILT["wikipedia-dpr"], threads=1)
