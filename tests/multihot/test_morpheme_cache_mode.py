"""The cached morpheme analysis is written atomically with the mode `open()` would give, not mkstemp's 0600."""

from __future__ import annotations

import os

from langrepr.data.korean.morphemes import read_analysis, write_analysis


def test_cached_analysis_round_trips_with_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "cache" / "analysis.jsonl.gz"
        analysed = [[["나", "NP"], ["는", "JX"]], [["간다", "VV"]]]
        write_analysis(path, analysed)
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644
    assert [[list(m) for m in sentence] for sentence in read_analysis(path)] == analysed
    assert [p.name for p in path.parent.iterdir()] == [path.name]     # no temporary file left behind
