"""The USPTO export as the loader meets it (missing, unset, damaged manifest or shards, empty text or split) and the
export's own credentials and network errors: one line naming the file and the fix, exit 2."""

from __future__ import annotations

import shutil

import pytest

from bad_inputs import USPTO, Case, empty_claims, first_shard, flip_byte, run_case

USPTO_CASES = [
    Case("uspto-missing-dir", [*USPTO, "dataset.datamodule.data_dir={tmp}/nowhere"], ["nowhere", "export"]),
    Case("uspto-unset", [*USPTO], ["(unset)", "LANGREPR_USPTO_DIR"], env={"LANGREPR_USPTO_DIR": None}),
    Case("uspto-no-manifest", [*USPTO, "dataset.datamodule.data_dir={export}"], ["no manifest.json", "rerun"],
         setup=lambda t, p: (p["export"] / "manifest.json").unlink()),
    Case("uspto-truncated-manifest", [*USPTO, "dataset.datamodule.data_dir={export}"],
         ["manifest.json is damaged", "re-run the export"],
         setup=lambda t, p: (p["export"] / "manifest.json").write_text('{"shards": [')),
    Case("shard-byte-flipped", [*USPTO, "dataset.datamodule.data_dir={export}"],
         ["does not match the sha256", "re-run the export"], setup=lambda t, p: flip_byte(first_shard(p))),
    Case("shard-truncated", [*USPTO, "dataset.datamodule.data_dir={export}"], ["does not match the sha256"],
         setup=lambda t, p: first_shard(p).write_bytes(first_shard(p).read_bytes()[:100])),
    Case("shard-replaced", [*USPTO, "dataset.datamodule.data_dir={export}"], ["does not match the sha256"],
         setup=lambda t, p: shutil.copy(p["export_other"] / first_shard(p).name, first_shard(p))),
    Case("shard-missing", [*USPTO, "dataset.datamodule.data_dir={export}"], ["is missing", "re-run the export"],
         setup=lambda t, p: first_shard(p).unlink()),
    Case("claims-all-empty", [*USPTO, "dataset.datamodule.data_dir={export}"], ["have no text", "re-export"],
         setup=empty_claims),
    Case("empty-split", [*USPTO, "dataset.datamodule.data_dir={export}", "dataset.datamodule.max_train_samples=0"],
         ["is empty", "max_*_samples"]),
]

@pytest.mark.parametrize("case", USPTO_CASES, ids=lambda c: c.id)
def test_bad_input_gives_one_line(case: Case, paths: dict, capfd, monkeypatch):
    run_case(case, paths, capfd, monkeypatch)


@pytest.mark.parametrize("content,expect", [(None, "no such file"), (b"{not json", "not a JSON key file"),
                                            (b'{"client_email": "x"}', "not a Google credentials file")])
def test_bad_credentials_file_is_named(tmp_path, monkeypatch, capsys, content, expect):
    from langrepr.data.patents import export as uspto_export

    key = tmp_path / "key.json"
    if content is not None:
        key.write_bytes(content)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    assert uspto_export.main(["export", "--out", str(tmp_path / "out"), "--project", "p"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expect in err and str(key) in err and "Traceback" not in err


def test_unreachable_network_is_one_line():
    from langrepr.data.patents.export import _is_network_error

    assert _is_network_error(ConnectionRefusedError(111, "refused"))
    assert _is_network_error(RuntimeError("wrapped").with_traceback(None)) is False
    assert _is_network_error(TimeoutError())
