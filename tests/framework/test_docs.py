"""The README and docs/ stay short, true to the Makefile, and free of dead paths.

- README.md is a five-minute read: under 250 lines, with the generated status block `make report` rewrites.
- docs/<paper>.md exists for each paper, names its make targets and carries the generated claims block.
- every `make <target>` named in README.md or docs/ is a target `make help` lists (a `## ` line of the Makefile),
  and every target `make help` lists is in the README's table.
- every relative link and every repository path in inline code resolves to a file or folder of the checkout;
  no machine-specific absolute path.
"""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAPERS = ("ewe", "tensorcoder", "multihot", "leam", "bitcipher")
PAGES = [README, *(DOCS / f"{paper}.md" for paper in PAPERS), DOCS / "framework.md"]
# paths a user creates, never committed: named by the docs as where to put a file
USER_PATHS = {"conf/local/default.yaml"}


def help_targets() -> dict[str, str]:
    """The targets `make help` lists: the Makefile lines `<target>: ... ## <description>` (its own grep)."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    return dict(m.groups() for m in (re.match(r"^([a-zA-Z0-9_-]+):.*## (.*)$", line) for line in lines) if m)


def code_text(markdown: str) -> str:
    """Fenced code blocks and inline code spans, where commands and paths are written."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", markdown, flags=re.M | re.S)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", markdown, flags=re.M | re.S)
    return "\n".join(fenced + re.findall(r"`([^`\n]+)`", prose))


def named_targets(markdown: str) -> set[str]:
    return set(re.findall(r"\bmake ([a-z][a-z0-9-]*)", code_text(markdown)))


def links(markdown: str) -> list[str]:
    """Targets of markdown links and images: [text](target) and ![alt](target)."""
    return re.findall(r"!?\[[^\]]*\]\(([^)\s]+)\)", markdown)


def test_readme_is_short_and_keeps_the_generated_status_block():
    text = README.read_text()
    assert len(text.splitlines()) < 250, "README.md must stay under 250 lines: move detail to docs/"
    lines = text.splitlines()
    assert "<!-- generated:status -->" in lines and "<!-- /generated:status -->" in lines
    assert lines.index("<!-- generated:status -->") < lines.index("<!-- /generated:status -->")


@pytest.mark.parametrize("paper", PAPERS)
def test_each_paper_page_has_its_targets_and_the_generated_claims_block(paper):
    page = DOCS / f"{paper}.md"
    assert page.exists(), f"docs/{paper}.md is missing"
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# "), f"docs/{paper}.md starts with the paper's title"
    assert "<!-- generated:claims -->" in lines and "<!-- /generated:claims -->" in lines, (
        f"docs/{paper}.md lacks the generated:claims markers (each on its own line) that `make report` fills")
    assert lines.index("<!-- generated:claims -->") < lines.index("<!-- /generated:claims -->")
    own = {t for t in help_targets() if t.startswith(f"{paper}-")}
    assert own, f"no make target starts with {paper}-"
    assert own <= named_targets(page.read_text()), f"docs/{paper}.md does not name {sorted(own - named_targets(page.read_text()))}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_make_target_named_exists(page):
    unknown = named_targets(page.read_text()) - set(help_targets())
    assert not unknown, f"{page.name} names make targets that `make help` does not list: {sorted(unknown)}"


def test_readme_lists_every_make_target():
    missing = set(help_targets()) - named_targets(README.read_text())
    assert not missing, f"README.md's target table misses {sorted(missing)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    dead = []
    for target in links(page.read_text()):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if not (page.parent / path).exists():
            dead.append(target)
    assert not dead, f"{page.relative_to(ROOT)} links to paths that do not exist: {dead}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_repository_path_in_code_exists(page):
    """`src/...`, `conf/...`, `scripts/...`, `tests/...`, `docs/...` written in code are paths of the checkout."""
    dead = []
    for token in re.findall(r"(?<![\w./$-])((?:src|conf|scripts|tests|docs)/[\w./-]*)", code_text(page.read_text())):
        token = token.rstrip(".")
        if token in USER_PATHS:
            continue
        if not (ROOT / token).exists():
            dead.append(token)
    assert not dead, f"{page.relative_to(ROOT)} names paths that do not exist: {sorted(set(dead))}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_machine_paths(page):
    found = re.findall(r"(?<![\w.~$])/(?:work|home|tmp|Users|mnt|root)/[^\s`)]*", page.read_text())
    assert not found, f"{page.relative_to(ROOT)} names machine-specific paths: {found}"
