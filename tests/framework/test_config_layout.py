"""Config files by paper, and no long line written twice (issue 34 item 1).

A long line (>= LONG characters once its indentation and trailing blanks are stripped; comment lines not counted)
written in two config files is a copy that no test keeps in step: a claim fixed in one file stays wrong in the
other. A `_target_:` line is not counted: it names the class a node builds, a reference to code (as an import
is), which each config that builds that class names. Hydra merges mappings, so an overlay keyed by id states only
what differs (`table_spec.normalised`), and a shared setting belongs in one file that the others name in their
defaults list (docs/framework.md, "Configuration layout").
"""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

from langrepr.confpaths import CONF_DIR, PAPERS, config_roots, option_files

LONG = 60
PAPER_GROUPS = ("experiment", "experiment_profile")   # a paper's tables live in its folder, none in conf/<group>/


def copied_lines(root: Path = CONF_DIR) -> dict[str, list[str]]:
    """{long line: the config files (relative to `root`) that write it}, for lines in two files or more."""
    where: dict[str, set[str]] = defaultdict(set)
    for path in sorted(root.rglob("*.yaml")):
        for line in path.read_text().splitlines():
            line = line.strip()
            if len(line) >= LONG and not line.startswith(("#", "_target_:")):
                where[line].add(path.relative_to(root).as_posix())
    return {line: sorted(files) for line, files in where.items() if len(files) > 1}


def test_no_long_line_is_copied_between_config_files():
    copies = [f"{len(files)} files {files}: {line[:100]}" for line, files in copied_lines().items()]
    assert not copies, ("a long config line is written in several files; key the overlay by id, or move the shared "
                        "setting to one file that the others name in their defaults:\n" + "\n".join(copies))


def test_the_copy_check_sees_a_copy_and_not_a_class_reference(tmp_path):
    """The check itself: a copied setting is found wherever it sits; a `_target_:` line is not a copy."""
    line = "lr: 1.0e-3            # the paper's rate (Section 4.2), kept for every row"
    for name in ("a.yaml", "sub/b.yaml"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(f"_target_: langrepr.tasks.label_embedding.LabelRegularisedMultilabelTask\n"
                                     f"optimizer:\n  {line}\n")
    assert copied_lines(tmp_path) == {line: ["a.yaml", "sub/b.yaml"]}


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
