"""A small core (issue 34 item 2): one `build_cell`, used by every caller, and no source file past the style guide.

Read from the source (AST), nothing is imported but `langrepr.build`, in a fresh interpreter.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

SRC = ROOT / "src" / "langrepr"
MAX_LINES = 450   # the style guide's ~400, with the margin


def _defines(path: Path, name: str) -> bool:
    return any(isinstance(node, ast.FunctionDef) and node.name == name for node in ast.walk(ast.parse(path.read_text())))


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_build_cell_is_defined_once():
    places = [p.relative_to(ROOT).as_posix() for p in sorted([*SRC.rglob("*.py"), *(ROOT / "scripts").glob("*.py")])
              if _defines(p, "build_cell")]
    assert places == ["src/langrepr/build.py"]


def test_training_the_plan_and_the_gpu_check_build_through_it():
    assert "langrepr.build.build_cell" in _imports(SRC / "train.py")
    assert "langrepr.build.build_net" in _imports(SRC / "plan" / "workload.py")
    assert "langrepr.build.compose" in _imports(SRC / "plan" / "cells.py")
    assert "langrepr.build.build_cell" in _imports(SRC / "benchmarking.py")
    assert "langrepr.plan.compose_cell" in _imports(ROOT / "scripts" / "gpu_check.py")   # the plan's, hence build's


def test_build_imports_neither_torch_nor_the_training_loop():
    code = ("import sys, langrepr.build; heavy = [m for m in ('torch', 'pytorch_lightning', 'langrepr.train') "
            "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_no_source_file_passes_the_line_limit():
    long = {p.relative_to(ROOT).as_posix(): n for p in sorted(SRC.rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split by role (docs: STYLE.md, ~400 lines): {long}"
