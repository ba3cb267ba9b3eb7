"""Options that are not key=value and an unreachable hub: one `error:` line that says what to write.
"""

from __future__ import annotations

import pytest

from cases import KO, S, out
from conftest import fails_with

pytestmark = pytest.mark.usefixtures("own_digest_cache", "fresh_root_logger")


def test_c22_an_option_with_dashes_names_the_override_to_write(tmp_path, capfd):
    assert fails_with(capfd, ["debug=smoke", "--profile", "weird"]) == (
        "unknown option '--profile': this command takes key=value overrides, not --options: write profile=weird "
        "(`python -m langrepr.train --help` lists Hydra's own options)")
    assert fails_with(capfd, [*S, "--seed=3"]).startswith("unknown option '--seed': this command takes key=value "
                                                          "overrides, not --options: write seed=3 ")
    from langrepr.train import check_options

    check_options(["-m", "--cfg", "job", "seed=-1", "--multirun"])   # Hydra's own options pass


def test_X25_the_hub_out_of_reach_is_one_line(tmp_path, capfd, monkeypatch):
    """A cell that reads a hub data set with HF_*_OFFLINE set: the line says to go online or read local copies."""
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'squad_kor_v1' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    line = fails_with(capfd, [*KO, "profile=quick", "dataset.corpus.source=hub:someone/korean_news", *out(tmp_path)])
    assert line.endswith(" could not reach the Hugging Face Hub (ConnectionError: Couldn't reach 'squad_kor_v1' on "
                         "the Hub (OfflineModeIsEnabled)): go online (unset HF_HUB_OFFLINE and HF_DATASETS_OFFLINE), "
                         "or point the cell's data settings at local copies (LANGREPR_DATA_DIR)")
