"""Config files by paper, and no long line written twice (issue 34 item 1).

A long line (>= LONG characters once its indentation and trailing blanks are stripped; comment lines not counted)
written in two config files is a copy that no test keeps in step: a claim fixed in one file stays wrong in the
other. A `_target_:` line is not counted: it names the class a node builds, a reference to code (as an import is),
which each config that builds that class names. Hydra merges mappings, so an overlay keyed by id states only what differs (`table_spec.normalised`), and
a shared setting belongs in one file that the others name in their defaults list. The copies still in the tree
are listed in `known_config_copies.txt` (a digest per line): a new copy fails here, and so does a listed one that
is gone, so that the list only shrinks.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from pathlib import Path

from langrepr.confpaths import CONF_DIR, PAPERS, config_roots, option_files

LONG = 60
KNOWN = Path(__file__).with_name("known_config_copies.txt")
PAPER_GROUPS = ("experiment", "experiment_profile")   # a paper's tables live in its folder, none in conf/<group>/


def digest(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()[:16]


def copied_lines() -> dict[str, list[str]]:
    """{long line: the config files (relative to conf/) that write it}, for lines in two files or more."""
    where: dict[str, set[str]] = defaultdict(set)
    for path in sorted(CONF_DIR.rglob("*.yaml")):
        for line in path.read_text().splitlines():
            line = line.strip()
            if len(line) >= LONG and not line.startswith(("#", "_target_:")):
                where[line].add(path.relative_to(CONF_DIR).as_posix())
    return {line: sorted(files) for line, files in where.items() if len(files) > 1}


def known() -> dict[str, int]:
    """{digest: number of files} of the copies accepted so far."""
    out = {}
    for row in KNOWN.read_text().splitlines():
        if row.strip() and not row.startswith("#"):
            key, count = row.split()[:2]
            out[key] = int(count)
    return out


def test_no_new_long_line_is_copied_between_config_files():
    accepted = known()
    new = [f"{len(files)} files {files}: {line[:100]}" for line, files in copied_lines().items()
           if accepted.get(digest(line), 0) < len(files)]
    assert not new, ("a long config line is written in several files; key the overlay by id or move the shared "
                     "setting to one file:\n" + "\n".join(new))


def test_the_list_of_known_copies_only_shrinks():
    now = {digest(line): len(files) for line, files in copied_lines().items()}
    stale = sorted(key for key, count in known().items() if now.get(key, 0) < count)
    assert not stale, (f"{KNOWN.name}: these copies are gone or fewer, lower or drop their rows: {stale}")


def test_every_experiment_and_its_profiles_live_in_a_paper_folder():
    """A table's experiment and overlays sit in conf/papers/<paper>/; only the cross-paper grid stays in conf/."""
    for group in PAPER_GROUPS:
        for name, path in option_files(group).items():
            paper = path.relative_to(CONF_DIR).parts
            if name.startswith("grid"):
                assert paper[0] == group, f"{group}={name}: the grid is no paper's"
                continue
            assert paper[0] == PAPERS and name.startswith(paper[1]), f"{group}={name} lives in {path}"


def test_a_paper_data_set_in_conf_dataset_is_read_by_several_papers():
    """conf/dataset/ holds only data sets two papers (or the grid) read; a paper's own sits in its folder."""
    folders = {root.name: root for root in config_roots() if PAPERS in root.parts} | {"grid": CONF_DIR / "grid_task"}
    for path in sorted((CONF_DIR / "dataset").glob("*.yaml")):
        named = re.compile(rf"\b{path.stem}\b")
        readers = {name for name, folder in folders.items() for f in folder.rglob("*.yaml")
                   if f.parent.name != "dataset" and named.search(f.read_text())}
        assert readers != {next(iter(readers), None)} - {"grid"} or not readers, \
            f"dataset={path.stem} is read by {readers} only: move it to conf/papers/{next(iter(readers))}/dataset/"
