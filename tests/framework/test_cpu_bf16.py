"""bf16 on CPU: kept where the CPU computes it natively, fp32 with one log line where it does not."""

from __future__ import annotations

import logging

from omegaconf import OmegaConf

from langrepr.train import cpu_has_bf16, resolve_precision


def test_bf16_falls_back_to_fp32_on_a_cpu_without_it(tmp_path, caplog):
    old = tmp_path / "cpuinfo"
    old.write_text("flags\t\t: fpu sse2 avx2 avx512f\n")
    new = tmp_path / "cpuinfo_amx"
    new.write_text("flags\t\t: fpu sse2 avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n")
    cfg = OmegaConf.create({"precision": "bf16-mixed", "accelerator": "cpu"})
    assert not cpu_has_bf16(str(old)) and cpu_has_bf16(str(new))
    with caplog.at_level(logging.WARNING, logger="langrepr.train"):
        assert resolve_precision(cfg, str(old)).precision == "32-true"
    assert "needs a CPU with AVX512-BF16 or AMX" in caplog.text
    assert resolve_precision(cfg, str(new)).precision == "bf16-mixed"
    assert not cpu_has_bf16(str(tmp_path / "absent"))
