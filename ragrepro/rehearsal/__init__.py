"""Rehearsal mode: run a paper-scale config on CPU with tiny stand-ins for the hub weights,
hub-schema fixtures for the hub datasets and a small Lucene index for `wikipedia-dpr`.

Switched on by the config group `rehearsal=cpu` (conf/rehearsal/cpu.yaml). While active, the
loaders ask this module where things are: `model_source` (stand-in folders), `hub_file`
(fixture rows in the hub layout) and `prebuilt_index` (the fixture index). Everything else,
loaders, converters, pipelines, metrics, rows, runs as in a real run. See docs/rehearsal.md."""
from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

FIXTURES_VERSION = 5
PREBUILT = {"wikipedia-dpr": "index/wikipedia-dpr"}
_ACTIVE: dict[str, Path] = {}


def is_active() -> bool:
    return "root" in _ACTIVE


def activate(root: Path) -> None:
    """Route hub models, datasets and prebuilt indexes to `root` (built by `ensure_fixtures`)."""
    _ACTIVE["root"] = Path(root)
    # DPR-format QA files default to ${oc.env:RAGREPRO_DATA,data}/dpr/...: the fixtures.
    os.environ["RAGREPRO_DATA"] = str(root)
    log.warning("REHEARSAL mode: stand-in models and fixture data from %s; numbers are "
                "meaningless", root)


def deactivate() -> None:
    _ACTIVE.clear()


def root() -> Path:
    if not is_active():
        raise RuntimeError("rehearsal mode is not active")
    return _ACTIVE["root"]


def model_source(source: str) -> str | None:
    """The stand-in folder for a hub model id while rehearsing, else None."""
    if not is_active():
        return None
    from .standins import needs_standin, standin_dir

    if not needs_standin(source):
        return None
    from ..paths import cache_dir

    return str(standin_dir(source, cache_dir()))


def hub_file(repo: str, config: str | None, split: str) -> Path | None:
    """The fixture file holding hub rows of (repo, config, split) while rehearsing."""
    if not is_active():
        return None
    from .fixtures import hub_file as path_of

    return path_of(root(), repo, config, split)


def prebuilt_index(name: str) -> Path | None:
    """The fixture Lucene index standing in for a pyserini prebuilt index while rehearsing."""
    if not is_active() or name not in PREBUILT:
        return None
    return root() / PREBUILT[name]


def ensure_fixtures(base: Path | None = None) -> Path:
    """Build the fixture tree once (files, then the Lucene index) and return its root."""
    from ..io import locked
    from ..paths import CONF_DIR, cache_dir
    from .fixtures import demo_propositions, fixture_articles, write_fixtures

    out = (base or cache_dir()) / f"rehearsal-fixtures-v{FIXTURES_VERSION}"
    with locked(out):
        if not (out / "done").exists():
            out.mkdir(parents=True, exist_ok=True)
            demos = demo_propositions(CONF_DIR / "riches" / "prompts")
            write_fixtures(out, fixture_articles(extra_titles=list(demos)), demos)
            build_fixture_index(out)
            (out / "done").write_text("ok\n")
    return out


def build_fixture_index(root_dir: Path) -> Path:
    """A Lucene index of the fixture DPR TSV with pyserini's wikipedia-dpr raw layout
    (contents = '"Title"\\ntext'), so the prebuilt-index code path reads it."""
    from ..data.records import Passage
    from ..retrieval.bm25 import build_lucene_index
    from ..retrieval.corpus import corpus_from_passages, read_dpr_tsv

    quoted = [Passage(pid=p.pid, title=f'"{p.title}"', text=p.text)
              for p in read_dpr_tsv(root_dir / "dpr" / "psgs_w100.tsv")]
    return build_lucene_index(corpus_from_passages("wikipedia-dpr-fixture", quoted),
                              out=root_dir / PREBUILT["wikipedia-dpr"], threads=1)
