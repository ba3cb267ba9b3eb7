"""Helpers shared by the bad-input and fault cases of several parts: run records, the one-line error of a
call, and the shorthand command lines of the case list, shrunk.

A case named by an id (`c22`, `X59`, `N01`, ...) is that case of issue 21's reliability case list; it asserts the
exact outcome: the exit code, the one `error:` line (no traceback), and that nothing finished is lost or replaced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def records(root: Path) -> dict[str, dict]:
    """metrics.json of every cell under root (cells moved aside by force=true excluded), by cell folder name."""
    return {p.parent.name: json.loads(p.read_text()) for p in sorted(root.rglob("metrics.json"))
            if not any(part.startswith(".") for part in p.relative_to(root).parts)}


def user_error(call, *args, **kwargs) -> str:
    from langrepr.errors import UserError

    with pytest.raises(UserError) as err:
        call(*args, **kwargs)
    return str(err.value)


def out(tmp_path: Path) -> list[str]:
    return [f"paths.output_root={tmp_path / 'out'}", f"paths.cache_dir={tmp_path / 'cache'}"]


# the bad-input shorthands of the case list, shrunk
S = ["dataset=synthetic", "model=bert_ewe", "debug=smoke"]
LE = ["experiment=leam_table2", "profile=quick", "model=leam", "dataset=ag_news", "++hydra.sweeper.params.seed=1",
      "debug=leam_smoke"]
BC = ["experiment=bitcipher_table1", "profile=quick", "++hydra.sweeper.params.seed=1", "pipeline.probe.epochs=1",
      "pipeline.probe.hidden=8", "bitcipher.corpus.shard_tokens=300", "bitcipher.workers=1",
      "bitcipher.corpus.sources=[{path: ptb/ptb.train.txt}]", "pipeline.vector_defaults.extra_vocab=[]"]
KO_SIZES = ["dataset.token_lists.bpe_size=120", "dataset.token_lists.pos_joined=10", "dataset.token_lists.syllables=40",
            "dataset.token_lists.dictionary_size=40", "pipeline.workers=1"]
KO = ["experiment=multihot_table1", "dataset=modu_newspaper", *KO_SIZES]
PTB_LINES = ["the cat sat on the mat", "john saw the dog in paris", "a big red dog ran home"]


def write_ptb(root: Path, lines: list[str], n: int = 40) -> Path:
    (root / "ptb").mkdir(parents=True, exist_ok=True)
    (root / "ptb" / "ptb.train.txt").write_text("".join(lines[i % len(lines)] + "\n" for i in range(n)))
    return root


PTB = ["dataset=ptb", "model=tensorcoder_1conv", "debug=smoke", "trainer.max_epochs=1", "model.net.hidden_size=16",
       "model.net.num_layers=1", "model.net.intermediate_size=16", "dataset.datamodule.seq_len=16"]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error:")]


def validate(argv: list[str]) -> list[str]:
    """What `main()` does before Hydra runs: canonical overrides, then compose + validate; the argv Hydra gets."""
    from langrepr.validation import canonical_overrides, check_command_line

    argv = canonical_overrides(list(argv))
    check_command_line(argv)
    return argv
