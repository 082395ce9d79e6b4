"""Issue 23: production code never imports the rehearsal, and imports are module-level
(a function-local import is a deliberate deferral of a heavy dependency, and says so)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("ragrepro", "ralm", "riches", "filco")
REHEARSAL = "ragrepro.rehearsal"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def production_modules() -> list[str]:
    """Every module of the four packages but the rehearsal (and `python -m` entry points,
    which run the CLI when imported)."""
    names = [module_name(p) for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))]
    return [n for n in names if not n.endswith("__main__")
            and n != REHEARSAL and not n.startswith(REHEARSAL + ".")]


def test_production_modules_are_found():
    names = production_modules()
    assert {"ragrepro.models.loading", "ragrepro.retrieval.bm25", "ragrepro.data.hub",
            "ragrepro.lock", "ragrepro.runner", "ralm", "riches", "filco"} <= set(names)
    assert not [n for n in names if n.startswith(REHEARSAL)]


def test_no_production_module_imports_the_rehearsal():
    """Import every production module in a fresh interpreter: the rehearsal is not loaded
    (its resolver reaches the loaders through ragrepro.sources, its setup through the
    config's `rehearsal.setup`)."""
    code = ("import importlib, json, sys\n"
            f"for name in {production_modules()!r}:\n"
            "    importlib.import_module(name)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m == 'ragrepro.rehearsal'"
            " or m.startswith('ragrepro.rehearsal.'))))\n")
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


# ---- function-local imports ----------------------------------------------------------------
# Files other helpers of issue 23 are still converting: at most this many local imports
# without a `# deferred:` comment (a ceiling that may only go down; delete a row at 0).
BASELINE: dict[str, int] = {
    "filco/data.py": 2, "filco/pipeline.py": 6, "filco/silver.py": 1, "filco/split.py": 1,
    "filco/table2.py": 1, "filco/tiny_t5.py": 5, "filco/train.py": 4,
    "ragrepro/configcheck.py": 2, "ragrepro/plan.py": 11, "ragrepro/rehearsal/cells.py": 1,
    "ragrepro/rehearsal/config.py": 1, "ragrepro/report/dashboard.py": 1,
    "ragrepro/report/plots.py": 2, "ragrepro/report/tables.py": 2,
    "ragrepro/report/wandb_sync.py": 1, "ralm/documents.py": 1, "ralm/lm_eval.py": 3,
    "ralm/predictive.py": 5, "ralm/qa.py": 1, "ralm/rerank.py": 1, "ralm/reranker.py": 3,
    "ralm/sources.py": 2, "riches/profile.py": 1,
}


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def local_imports(tree: ast.Module) -> list[ast.stmt]:
    """Import statements inside a function or class body (module-level `if TYPE_CHECKING:`
    blocks and try/except at module level count as module-level)."""
    found: list[ast.stmt] = []

    def walk(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                if nested:
                    found.append(child)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                walk(child, True)
            elif not (not nested and _type_checking(child)):
                walk(child, nested)
    walk(tree, False)
    return found


def is_marked(lines: list[str], lineno: int) -> bool:
    """`# deferred: <why>` on the import's line, or in the comments heading its group of
    consecutive import lines (blank lines allowed)."""
    if "deferred:" in lines[lineno - 1]:
        return True
    i = lineno - 2
    while i >= 0:
        text = lines[i].strip()
        if text.startswith("#"):
            if "deferred:" in text:
                return True
        elif text and not text.startswith(("from ", "import ", ")")) and not text.endswith(","):
            return False
        i -= 1
    return False


def unmarked(path: Path) -> list[int]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    return [n.lineno for n in local_imports(ast.parse(source)) if not is_marked(lines, n.lineno)]


def test_the_scanner_sees_local_imports_and_their_marks():
    src = ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from x import y\n"
           "def f():\n    import json\n    # deferred: torch (heavy)\n    import torch\n\n"
           "    from a import (\n        b,\n    )\n    import faiss  # deferred: faiss\n")
    tree = ast.parse(src)
    assert [n.lineno for n in local_imports(tree)] == [5, 7, 9, 12]
    lines = src.splitlines()
    assert [is_marked(lines, n) for n in (5, 7, 9, 12)] == [False, True, True, True]


def test_function_local_imports_are_marked_deferrals():
    """A function-local import is a deliberate deferral of a heavy dependency (torch,
    transformers, faiss, pyserini, datasets, wandb, the JVM), marked `# deferred: why`. An
    import cycle that appears when one is moved up means the layering is wrong: move the
    shared piece down (docs/architecture.md, 'Imports'), do not hide it in a function."""
    over: list[str] = []
    for pkg in PACKAGES:
        for path in sorted((REPO / pkg).rglob("*.py")):
            rel = str(path.relative_to(REPO))
            lines = unmarked(path)
            if len(lines) > BASELINE.get(rel, 0):
                over.append(f"{rel}: {len(lines)} unmarked local imports (allowed "
                            f"{BASELINE.get(rel, 0)}) at lines {lines}")
    assert not over, ("Move these imports to module level, or mark a deliberate deferral "
                      "of a heavy dependency with `# deferred: <why>`:\n" + "\n".join(over))
