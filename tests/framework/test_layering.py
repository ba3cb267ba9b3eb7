"""The layering rules of the package, checked on the import graph (AST; no module is imported).

models know no data, tasks, pipelines, Lightning or Hydra; data knows no models, tasks or pipelines; tasks import
no data modules and no pipelines, pipelines no tasks (what both need, scores, LM masks and targets, lives in
modules under both: `downstream_scores`, `lm_targets`, `metrics`, which import neither); rendering (tables,
report, verdicts) imports no training code, so `make tables` starts without torch.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

SRC = ROOT / "src" / "langrepr"
RULES = {
    "models": ("langrepr.data", "langrepr.tasks", "langrepr.pipelines", "pytorch_lightning", "lightning", "hydra",
               "langrepr.train"),
    "data": ("langrepr.models", "langrepr.tasks", "langrepr.pipelines", "langrepr.train"),
    "tasks": ("langrepr.data", "langrepr.train", "langrepr.pipelines"),
    "pipelines": ("langrepr.tasks", "langrepr.train"),
    **{shared: ("langrepr.data", "langrepr.models", "langrepr.tasks", "langrepr.pipelines", "langrepr.train")
       for shared in ("downstream_scores.py", "lm_targets.py", "metrics.py")},
}


def imports_of(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("layer", sorted(RULES))
def test_a_layer_imports_nothing_it_must_not_know(layer):
    broken = []
    place = SRC / layer
    for path in [place] if place.is_file() else sorted(place.rglob("*.py")):
        for name in sorted(imports_of(path)):
            if any(name == bad or name.startswith(bad + ".") for bad in RULES[layer]):
                broken.append(f"{path.relative_to(SRC)} imports {name}")
    assert not broken, "\n".join(broken)


def test_rendering_and_the_plan_start_without_torch():
    """Importing Lightning costs about 9 s of CPU here: a table, the report or the plan must not pay it."""
    code = ("import sys, langrepr.tables, langrepr.report, langrepr.verdicts, langrepr.table_spec, langrepr.plan; "
            "heavy = [m for m in ('torch', 'pytorch_lightning', 'transformers', 'langrepr.train') if m in sys.modules]; "
            "print(heavy); sys.exit(1 if heavy else 0)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
