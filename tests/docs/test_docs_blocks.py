"""Generated blocks in README.md and docs/*.md (scripts/docs.py): selection, refill, repo state."""
import subprocess
from pathlib import Path

import pytest

from scripts import docs

SOURCE = """# Bench

## Machine

- cores: 2

## ralm

(ran in 3 s)

| a | b |
|---|---|
| 1 | 2 |

| target | met |
|---|---|
| x | yes |
"""

PAGE = """# Page

intro
<!-- generated from results/x.md section=ralm table=2 -->
| stale | table |
<!-- end generated -->
outro
"""


def test_markdown_tables_splits_on_non_table_lines():
    assert docs.markdown_tables(SOURCE) == ["| a | b |\n|---|---|\n| 1 | 2 |",
                                            "| target | met |\n|---|---|\n| x | yes |"]


def test_section_body_stops_at_next_section():
    assert docs.section_body(SOURCE, "Machine") == "- cores: 2"


def test_select_applies_section_then_table():
    opts = docs.parse_options(" section=ralm table=2", "here")
    assert docs.select(SOURCE, opts) == "| target | met |\n|---|---|\n| x | yes |"
    assert docs.select(SOURCE, ()) == SOURCE.strip("\n")


def test_render_replaces_block_and_keeps_the_rest():
    new, missing = docs.render(PAGE, lambda src: SOURCE if src == "results/x.md" else None)
    assert missing == []
    assert new == PAGE.replace("| stale | table |", "| target | met |\n|---|---|\n| x | yes |")
    # a second pass changes nothing (idempotent)
    assert docs.render(new, lambda src: SOURCE)[0] == new


def test_render_keeps_block_when_source_absent():
    new, missing = docs.render(PAGE, lambda src: None)
    assert new == PAGE and missing == ["results/x.md"]


@pytest.mark.parametrize("page, message", [
    ("<!-- generated from a.md -->\nx\n", "never closed"),
    ("x\n<!-- end generated -->\n", "without an opening"),
    ("<!-- generated from a.md -->\n<!-- generated from b.md -->\n<!-- end generated -->\n",
     "opens inside"),
    ("<!-- generated from a.md rows=3 -->\n<!-- end generated -->\n", "unknown option rows=3"),
    ("<!-- generated from a.md table=first -->\n<!-- end generated -->\n", "table number"),
    ("<!-- generated a.md -->\n", "malformed marker"),
])
def test_bad_markers_name_the_problem(page, message):
    with pytest.raises(ValueError, match=message):
        docs.render(page, lambda src: SOURCE)


def test_bad_selection_names_the_choices():
    with pytest.raises(ValueError, match=r"no section '## nope'.*'Machine', 'ralm'"):
        docs.select(SOURCE, (("section", "nope"),))
    with pytest.raises(ValueError, match="has 2 Markdown tables"):
        docs.select(SOURCE, (("section", "ralm"), ("table", "3")))


def test_committed_docs_match_their_generated_sources():
    """`make docs` has been run before the commit: every committed block equals its committed
    source, whatever a local run (make reproduce-table1) rewrote since (issue 28)."""
    root = Path(docs.__file__).resolve().parents[1]
    assert docs.stale_pages(root) == []


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _repo_with_page(tmp_path):
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "results").mkdir()
    (repo / "results" / "x.md").write_text(SOURCE)
    (repo / "README.md").write_text(docs.render(PAGE, lambda src: SOURCE)[0])
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _commit(repo, "first")
    return repo


def _commit(repo, message):
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-a", "-m", message)


def test_a_local_rerun_that_rewrites_a_source_does_not_make_the_docs_stale(tmp_path):
    repo = _repo_with_page(tmp_path)
    assert docs.stale_pages(repo) == []
    # make reproduce-table1 on another CPU: the source's numbers moved, the page did not
    (repo / "results" / "x.md").write_text(SOURCE.replace("| x | yes |", "| x | no |"))
    assert docs.stale_pages(repo) == []
    # ... and `make docs` after it: the edited page is checked against the local source
    docs.refresh(repo, check=False)
    assert "| x | no |" in (repo / "README.md").read_text()
    assert docs.stale_pages(repo) == []


def test_a_committed_page_that_disagrees_with_its_committed_source_is_stale(tmp_path):
    repo = _repo_with_page(tmp_path)
    (repo / "results" / "x.md").write_text(SOURCE.replace("| x | yes |", "| x | no |"))
    _commit(repo, "source changed, make docs forgotten")
    assert docs.stale_pages(repo) == ["README.md"]
    # a page edited here is checked against the sources here: stale while it disagrees...
    (repo / "README.md").write_text(PAGE)
    assert docs.stale_pages(repo) == ["README.md"]
    # ... and fine once `make docs` refilled it, before the commit
    docs.refresh(repo, check=False)
    assert docs.stale_pages(repo) == []


def test_readme_links_every_docs_page_and_fits_on_a_screen():
    root = Path(docs.__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    for command in ("make reproduce-table1", "make test"):
        assert command in readme
    for page in sorted((root / "docs").glob("*.md")):
        assert f"(docs/{page.name})" in readme, f"README does not link docs/{page.name}"
