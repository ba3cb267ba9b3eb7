"""PTB files as the masked-LM loader meets them (missing, tiny, not UTF-8, another corpus's evaluation split, no
folder): one line naming the file and the fix, exit 2."""

from __future__ import annotations

import pytest

from bad_inputs import PTB, Case, run_case

PTB_CASES = [
    Case("ptb-missing-file", [*PTB, "paths.data_dir={ptb_root}"], ["ptb.valid.txt not found", "LANGREPR_DATA_DIR"],
         setup=lambda t, p: (p["ptb"] / "ptb.valid.txt").unlink()),
    Case("ptb-tiny", [*PTB, "paths.data_dir={ptb_root}"], ["only 5 tokens", "real corpus"],
         setup=lambda t, p: (p["ptb"] / "ptb.train.txt").write_text("a tiny training file\n")),
    Case("ptb-not-utf8", [*PTB, "paths.data_dir={ptb_root}"], ["ptb.test.txt is not UTF-8", "re-encode"],
         setup=lambda t, p: (p["ptb"] / "ptb.test.txt").write_bytes(b"caf\xe9 au lait\n" * 20)),
    Case("ptb-foreign-eval", [*PTB, "paths.data_dir={ptb_root}"], ["covers only", "same corpus"],
         setup=lambda t, p: (p["ptb"] / "ptb.valid.txt").write_text("ganz andere woerter hier\n" * 30)),
    Case("ptb-data-dir-missing", [*PTB, "paths.data_dir={tmp}/nowhere"], ["not found", "data_dir"]),
]

@pytest.mark.parametrize("case", PTB_CASES, ids=lambda c: c.id)
def test_bad_input_gives_one_line(case: Case, paths: dict, capfd, monkeypatch):
    run_case(case, paths, capfd, monkeypatch)
