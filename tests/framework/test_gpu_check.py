"""scripts/gpu_check.py --device cpu --small: the GPU check's code path at tiny widths writes every key per paper.

The second version's parts (compile modes, the Lightning loop against the bare one, packing, synchronisations)
only add keys: the first version's are checked unchanged (`langrepr.plan` reads them).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from langrepr.utils import PROJECT_ROOT

ROWS = {"ewe": ["bert_ewe"], "tensorcoder": ["transformer_8head", "tensorcoder_8conv"], "multihot": ["multihot_basic"],
        "leam": ["leam"], "bitcipher": ["causal_lm"]}


def gpu_check_small(tmp_path, *extra: str) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(PROJECT_ROOT / "scripts" / "gpu_check.py"), "--device", "cpu",
                           "--small", "--out", str(tmp_path), *extra],
                          capture_output=True, text=True, timeout=600, env=env, cwd=PROJECT_ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (path,) = tmp_path.glob("gpu_check_small_*.json")
    return json.loads(path.read_text())


def test_gpu_check_small_on_cpu_writes_every_paper(tmp_path):
    record = gpu_check_small(tmp_path, "--skip", "compile,loop,packing")
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
            assert cell["syncs_per_step"] is None                              # counted on CUDA only
            assert cell["compile"] == {"skipped": "--skip compile"}
    assert record["version"] == 2 and record["skipped_parts"] == ["compile", "loop", "packing"]
    assert record["loop"] == {"skipped": "--skip loop"} and record["packing"] == {"skipped": "--skip packing"}
    assert record["papers"]["multihot"]["multihot_basic"]["kind"] == "multihot_mlm"
    assert record["papers"]["multihot"]["multihot_basic"]["shape"]["loss"] == "mhsce"
    points = record["attention"]["points"]
    assert [p["n"] for p in points] == [16, 32]
    for point in points:
        for layer in ("tensorcoder_8conv", "sdpa_8head"):
            assert point[layer]["forward_ms"] > 0 and point[layer]["gflops"] > 0


def test_gpu_check_rejects_an_unknown_part(tmp_path):
    proc = subprocess.run([sys.executable, str(PROJECT_ROOT / "scripts" / "gpu_check.py"), "--device", "cpu", "--small",
                           "--out", str(tmp_path), "--skip", "compile,warp"], capture_output=True, text=True, timeout=60,
                          cwd=PROJECT_ROOT)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        "error: --skip takes compile, syncs, loop, packing; not warp"]


@pytest.mark.slow  # a CPU torch.compile (~30 s), two langrepr.train runs and 1 + 2 packed processes: ~90 s
def test_gpu_check_v2_parts_small_on_cpu(tmp_path):
    data = os.environ.get("LANGREPR_DATA_DIR")
    if not data or not os.path.exists(os.path.join(data, "ptb", "ptb.train.txt")):
        pytest.skip("the Lightning loop part reads PTB: needs LANGREPR_DATA_DIR with ptb/")
    record = gpu_check_small(tmp_path)
    tc = record["papers"]["tensorcoder"]
    compiled = tc["tensorcoder_8conv"]["compile"]
    assert compiled["default"]["steps_per_s"] > 0 and compiled["default"]["compile_s"] >= 0
    assert compiled["default"]["mfu"] is None and compiled["default"]["peak_mem_mib"] is None
    assert compiled["reduce-overhead"] == {"skipped": "CUDA graphs: CUDA only"}
    assert "skipped" in tc["transformer_8head"]["compile"]                 # --small compiles one cell only
    loop = record["loop"]
    assert loop["cell"][:2] == ["experiment=tensorcoder_table1", "model=tensorcoder_8conv"]
    assert loop["bare_fp16_steps_per_s"] == tc["tensorcoder_8conv"]["fp16"]["steps_per_s"]
    eager = loop["lightning"]["eager"]
    assert "steps_per_s" in eager or "too noisy" in eager.get("error", ""), eager    # differenced wall times
    assert set(loop["lightning"]) == {"eager", "default", "reduce-overhead"}
    points = record["packing"]["points"]
    assert [p["copies"] for p in points] == [1, 2]
    for point in points:
        assert "errors" not in point, point
        assert len(point["per_copy_steps_per_s"]) == point["copies"] and point["aggregate_steps_per_s"] > 0
