"""scripts/gpu_check.py --device cpu --small: the GPU check's code path at tiny widths writes every key per paper."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from langrepr.utils import PROJECT_ROOT

ROWS = {"ewe": ["bert_ewe"], "tensorcoder": ["transformer_8head", "tensorcoder_8conv"], "multihot": ["multihot_basic"],
        "leam": ["leam"], "bitcipher": ["causal_lm"]}


def test_gpu_check_small_on_cpu_writes_every_paper(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(PROJECT_ROOT / "scripts" / "gpu_check.py"), "--device", "cpu",
                           "--small", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env, cwd=PROJECT_ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (path,) = tmp_path.glob("gpu_check_small_*.json")
    record = json.loads(path.read_text())
    assert record["small"] is True and record["device"] == "cpu" and record["peak_tflops"] is None
    assert set(record["papers"]) == set(ROWS)
    for paper, rows in ROWS.items():
        assert set(record["papers"][paper]) == set(rows)
        for row in rows:
            cell = record["papers"][paper][row]
            assert "error" not in cell, cell
            assert cell["params"] > 0 and cell["flops_per_step"] > 0
            assert cell["batch"] == cell["micro_batch"] == 2 and cell["oom_batches"] == []
            for precision in ("fp16", "bf16"):
                r = cell[precision]
                assert r["steps_per_s"] > 0 and r["samples_per_s"] == pytest.approx(2 * r["steps_per_s"])
                assert r["mfu"] is None and r["peak_mem_mib"] is None          # no GPU: no peak, no CUDA memory
    assert record["papers"]["multihot"]["multihot_basic"]["kind"] == "multihot_mlm"
    assert record["papers"]["multihot"]["multihot_basic"]["shape"]["loss"] == "mhsce"
    points = record["attention"]["points"]
    assert [p["n"] for p in points] == [16, 32]
    for point in points:
        for layer in ("tensorcoder_8conv", "sdpa_8head"):
            assert point[layer]["forward_ms"] > 0 and point[layer]["gflops"] > 0
