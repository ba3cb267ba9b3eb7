"""The measuring discipline of `make bench`: spreads, interleaved order, a competing process that goes away."""

from __future__ import annotations

import json

import pytest
import torch

from langrepr.benchmarking import (
    competing_process,
    interleaved_rounds,
    spread,
    steps_per_s,
    write_bench,
    write_results,
)


def test_spread_is_the_median_quartiles_and_range_of_the_rounds():
    assert spread([3.0, 1.0, 2.0, 5.0, 4.0]) == {"median": 3.0, "q1": 2.0, "q3": 4.0, "min": 1.0, "max": 5.0, "n": 5}
    assert spread([0.7]) == {"median": 0.7, "q1": 0.7, "q3": 0.7, "min": 0.7, "max": 0.7, "n": 1}


def test_rounds_alternate_the_order_so_each_candidate_runs_first_and_last_equally_often():
    order = []
    runs = interleaved_rounds({"a": lambda: order.append("a") or len(order),
                               "b": lambda: order.append("b") or len(order)}, rounds=4)
    assert order == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert runs == {"a": [1, 4, 5, 8], "b": [2, 3, 6, 7]}


def test_steady_state_rate_skips_the_warm_up_steps():
    starts = [0.0, 5.0, 10.0, 11.0, 12.0]           # two slow warm-up steps, then 1 s per step
    assert steps_per_s(starts, last_end=13.0, warmup=2) == pytest.approx(1.0)


def test_the_competing_process_runs_during_the_block_and_is_gone_after_it():
    with competing_process(threads=1) as proc:
        assert proc.poll() is None
    assert proc.poll() is not None


def test_every_written_result_records_its_hardware_and_threads(tmp_path):
    """A ratio is read against the machine it ran on: each result carries CPU, cores, GPU and torch threads."""
    write_bench(tmp_path / "one.json", {"name": "r", "ratio": 1.2})
    (result,) = [json.loads((tmp_path / "one.json").read_text())]
    assert result["machine"]["threads"] == torch.get_num_threads() and result["machine"]["cores"] >= 1
    assert result["machine"]["cpu"] and "gpu" in result["machine"]
    old = {"name": "old", "ratio": 0.9}                      # written before machines were recorded: kept as is
    (tmp_path / "many.json").write_text(json.dumps([old]))
    write_results(tmp_path / "many.json", [{"name": "new", "ratio": 1.1}])
    kept, new = json.loads((tmp_path / "many.json").read_text())
    assert kept == old and new["machine"]["threads"] == torch.get_num_threads()
