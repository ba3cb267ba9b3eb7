"""The table-driven bad-input and fault cases of several parts (config, the USPTO and PTB loaders, a cell's
files): each gives a non-zero exit, ONE line naming the problem and the fix, no traceback, and nothing
half-written. Each part's test module holds its own case list and calls `run_case`.

Every case runs `langrepr.train.main()` in this process (as `python -m langrepr.train` would, minus the
interpreter start), so the suite stays cheap: most cases stop at validation, before any data is read.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from conftest import run_main

SMOKE = ["debug=smoke", "trainer.max_epochs=1"]
USPTO = ["dataset=uspto", "model=bert_ewe", *SMOKE]
PTB = ["dataset=ptb", "model=tensorcoder_1conv", *SMOKE, "model.net.hidden_size=16", "model.net.num_layers=1",
       "model.net.intermediate_size=16", "dataset.datamodule.seq_len=16"]


@dataclass
class Case:
    """argv (with {export}, {ptb_root}, {cell}, {tmp} placeholders), the words the line must contain, and an
    optional setup(tmp, paths) that breaks something before the run."""

    id: str
    argv: list[str]
    expect: list[str]
    setup: Callable[[Path, dict], None] | None = None
    env: dict = field(default_factory=dict)


# ---------------------------------------------------------------- fixtures: tiny data, made once

# ---------------------------------------------------------------- setups that break things

def flip_byte(path: Path, offset: int = 200) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def first_shard(p: dict) -> Path:
    return p["export"] / json.loads((p["export"] / "manifest.json").read_text())["shards"][0]["file"]


def empty_claims(_tmp: Path, p: dict) -> None:
    import pyarrow.parquet as pq

    from langrepr.data.patents.files import write_manifest, write_shard

    manifest = json.loads((p["export"] / "manifest.json").read_text())
    for shard in manifest["shards"]:
        rows = pq.read_table(p["export"] / shard["file"]).to_pylist()
        for row in rows:
            row["claims"] = ""
        shard.update(write_shard(p["export"] / shard["file"], rows))
    write_manifest(p["export"], manifest)


def write_cell_file(rel: str, content: bytes) -> Callable[[Path, dict], None]:
    def setup(_tmp: Path, p: dict) -> None:
        (p["cell"] / rel).parent.mkdir(parents=True, exist_ok=True)
        (p["cell"] / rel).write_bytes(content)
    return setup


def a_file_as_output_root(_tmp: Path, p: dict) -> None:
    (p["tmp"] / "afile").write_text("not a folder")


def train_once(_tmp: Path, p: dict) -> None:
    """A finished cell in {cell} (smoke size) that the next run must not silently reuse."""
    assert run_main([*USPTO, f"dataset.datamodule.data_dir={p['export']}", f"hydra.run.dir={p['cell']}",
                     f"paths.output_root={p['tmp'] / 'out'}", f"paths.cache_dir={p['tmp'] / 'cache'}"]) == 0


def then(*steps: Callable[[Path, dict], None]) -> Callable[[Path, dict], None]:
    def setup(tmp: Path, p: dict) -> None:
        for step in steps:
            step(tmp, p)
    return setup


def swap_export(_tmp: Path, p: dict) -> None:
    shutil.rmtree(p["export"])
    shutil.copytree(p["export_other"], p["export"])


def half_written(root: Path) -> list[str]:
    """Temporary files left behind, or a cell that claims to be finished."""
    bad = [str(p) for p in root.rglob(".*.tmp")]
    for path in root.rglob("metrics.json"):
        try:
            if json.loads(path.read_text()).get("status") == "finished" and "out" in path.parts:
                bad.append(f"{path} says finished")
        except ValueError:
            pass
    return bad



def run_case(case: Case, paths: dict, capfd, monkeypatch) -> None:
    """Run one case in this process: exit 2, one `error:` line holding every expected word, no traceback,
    nothing half-written."""
    for key, value in case.env.items():
        if value is None:
            monkeypatch.delenv(key, raising=False)
        else:
            monkeypatch.setenv(key, value)
    if case.setup is not None:
        case.setup(paths["tmp"], paths)
        capfd.readouterr()
    # earlier finished cells (train_once) are legitimately finished: only what this run writes is judged
    finished_before = {p for p in paths["tmp"].rglob("metrics.json")}
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) for a in case.argv]
    if not any(a.startswith("paths.output_root=") for a in argv):
        argv.append(f"paths.output_root={paths['tmp'] / 'out'}")
    argv.append(f"paths.cache_dir={paths['tmp'] / 'cache'}")
    code = run_main(argv)
    out, err = capfd.readouterr()
    assert code == 2, (code, err[-3000:])
    assert "Traceback" not in out + err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err[-3000:]
    for word in case.expect:
        assert word.lower() in errors[0].lower(), (word, errors[0])
    leftovers = [b for b in half_written(paths["tmp"]) if not any(str(p) in b for p in finished_before)]
    assert not leftovers, leftovers
