"""Smoke test of every Bit Cipher table target: the quick sweep runs on tiny generated text and renders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from test_bit_cipher_pipeline import write_tiny_data_dir

CONF = Path(__file__).resolve().parents[1] / "conf"
BITCIPHER_TABLES = sorted(p.stem for p in (CONF / "experiment").glob("bitcipher_table*.yaml"))
SWEEPS = {"bitcipher_table1": ["bitcipher_table1"], "bitcipher_table6": ["bitcipher_table6"]}


def test_every_table_has_a_smoke_sweep():
    assert sorted(t for tables in SWEEPS.values() for t in tables) == BITCIPHER_TABLES


@pytest.mark.parametrize("sweep", sorted(SWEEPS))
def test_bitcipher_table_targets_run_and_render_on_tiny_text(tmp_path, sweep):
    data = write_tiny_data_dir(tmp_path / "data")
    out = tmp_path / "outputs"
    env = {"LANGREPR_DATA_DIR": str(data)}
    run = run_cli("langrepr.train", "-m", f"experiment={sweep}", "profile=quick", "++hydra.sweeper.params.seed=1",
                  "pipeline.probe.epochs=2", "pipeline.probe.hidden=16", "bitcipher.corpus.shard_tokens=300",
                  "bitcipher.workers=1", f"paths.output_root={out}", f"paths.cache_dir={tmp_path / 'cache'}",
                  env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    for table in SWEEPS[sweep]:
        render = run_cli("langrepr.tables", table, "--profile", "quick", "--outputs", str(out), env=env)
        assert render.returncode == 0, render.stderr[-3000:]
        result = json.loads((out / "tables" / f"{table}.quick.json").read_text())
        cells = [c for row in result["rows"] for c in row["cells"].values()]
        assert all(c["ours"] is not None for c in cells), f"{table}: a cell of the smoke sweep did not run"
