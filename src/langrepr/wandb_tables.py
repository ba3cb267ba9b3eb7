"""wandb runs that mirror the paper tables (`logger=wandb`): same group, same column names, same rendered table.

Nothing here is a second source of truth: the values a run puts in its summary under the table's column names
are computed by `langrepr.tables.run_value` from the same record `metrics.json` holds, and the `wandb.Table` it
logs is `langrepr.tables.build` over the finished run dirs of its sweep (plus this run). A dashboard grouped by
wandb group therefore shows the table as `make <paper>-table<N>` renders it.

- group: the rendered table's file stem, `<run_id>` (full/exact profile) or `<run_id>.<profile>`, so a quick and
  a full sweep of one table are two groups, as they are two table files;
- tags: `paper:<p>`, `table:<run_id>`, `profile:<p>`, `model:<m>`, `dataset:<d>`;
- summary: for the row(s) whose `match` selects this run, every table column it fills, under the column's own
  name (e.g. `2015A F1`), plus `table/row`;
- artefact: the table so far (`ours` and `paper` per column) as a `wandb.Table`, logged once the run has tested.

Offline without a key (train.py sets WANDB_MODE=offline); `offline_run_records` reads an offline run back.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from pytorch_lightning.loggers import WandbLogger
from pytorch_lightning.utilities import rank_zero_only

from langrepr.table_spec import normalised

LEVELDB_BLOCK = 32768  # wandb's transaction log is LevelDB-log framed: 32 KiB blocks, 7-byte record headers


def table_stem(run_id: str, profile: str) -> str:
    """The name `langrepr.tables.render` gives the table file (and this module gives the wandb group)."""
    return run_id if profile in ("full", "exact") else f"{run_id}.{profile}"


def paper_of(run_id: str) -> str:
    return run_id.split("_table")[0] if "_table" in run_id else run_id


def run_tags(run_id: str, profile: str, choices: dict[str, str]) -> list[str]:
    tags = [f"paper:{paper_of(run_id)}", f"table:{run_id}", f"profile:{profile}"]
    tags += [f"{group}:{choices[group]}" for group in ("model", "dataset") if choices.get(group)]
    return tags


def current_choices() -> dict[str, str]:
    """Config-group choices of this Hydra job (model, dataset, …); {} when called outside a Hydra app."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return {}
    return {k: str(v) for k, v in HydraConfig.get().runtime.choices.items() if v is not None}


def plain(node: Any) -> Any:
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) else node


def cells_of_run(spec: dict, record: dict) -> tuple[list[str], dict[str, float]]:
    """The rows that select this run and the column values it gives them, exactly as the renderer reads them."""
    from langrepr.tables import matches, run_value

    rows, values = [], {}
    for row in spec.get("rows", []):
        if not matches(record, row.get("match")):
            continue
        rows.append(row["key"])
        for column in spec.get("columns", []):
            if matches(record, column.get("match")):
                value = run_value(record, column, row)
                if value is not None:
                    values[column["name"]] = value
    return rows, values


def table_rows(table: dict) -> tuple[list[str], list[list[Any]]]:
    """A built table as wandb.Table columns/data: row, then `ours` and `paper` for every column."""
    columns = ["row"] + [f"{c} {side}" for c in table["columns"] for side in ("ours", "paper")]
    data = [[row["key"]] + [row["cells"][c][side] for c in table["columns"] for side in ("ours", "paper")]
            for row in table["rows"]]
    return columns, data


class TableWandbLogger(WandbLogger):
    """`WandbLogger` whose group, tags, summary and logged table follow the paper table of the sweep."""

    def __init__(self, *, run_id: str, profile: str, table: Any = None, sweep_dir: str | None = None,
                 tags: list[str] | None = None, group: str | None = None, **kwargs: Any) -> None:
        self.run_id, self.profile = run_id, profile
        spec = plain(table)
        self.spec = normalised(spec) if spec else None   # keyed columns/rows/claims/notes: lists
        self.sweep_dir = Path(sweep_dir) if sweep_dir else None
        self.choices = current_choices()
        self.latest: dict[str, float] = {}
        self.table_logged = False
        super().__init__(group=group or table_stem(run_id, profile),
                         tags=[*run_tags(run_id, profile, self.choices), *(tags or [])], **kwargs)

    @rank_zero_only
    def log_metrics(self, metrics: Any, step: int | None = None) -> None:
        super().log_metrics(metrics, step)
        self.latest.update({k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))})

    def run_record(self) -> dict:
        """This run as `langrepr.tables` sees a finished one: metrics.json fields + the resolved config."""
        run_dir = Path(self.save_dir or ".")
        record: dict[str, Any] = {"choices": dict(self.choices), "params": {}, "config": {}}
        if (run_dir / "metrics.json").exists():  # train.py writes it (status running) before fitting
            record.update(json.loads((run_dir / "metrics.json").read_text()))
        if (run_dir / "config_resolved.yaml").exists():
            record["config"] = yaml.safe_load((run_dir / "config_resolved.yaml").read_text()) or {}
        record["metrics"] = {**record.get("metrics", {}), **self.latest}
        record.update(status="finished", dir=str(run_dir), mtime=time.time())
        return record

    @rank_zero_only
    def finalize(self, status: str) -> None:
        super().finalize(status)
        if status != "success" or not self.spec or self._experiment is None:
            return
        record = self.run_record()
        rows, values = cells_of_run(self.spec, record)
        summary = self.experiment.summary
        for name, value in values.items():
            summary[name] = value
        if rows:
            summary["table/row"] = ", ".join(rows)
        if not self.table_logged and any(k.startswith("test/") for k in self.latest):
            self.log_rendered_table(record)

    def log_rendered_table(self, record: dict) -> None:
        """The table built from the sweep's finished run dirs plus this run, as a wandb.Table and an artefact."""
        import wandb

        from langrepr.tables import build, load_runs

        here = Path(record["dir"]).resolve()
        others = load_runs(self.sweep_dir) if self.sweep_dir and self.sweep_dir.exists() else []
        runs = [r for r in others if Path(r["dir"]).resolve() != here] + [record]
        built = build({"name": self.run_id, **self.spec}, runs, self.profile)
        columns, data = table_rows(built)
        wb_table = wandb.Table(columns=columns, data=data)
        stem = table_stem(self.run_id, self.profile)
        self.experiment.log({f"table/{stem}": wb_table})
        artifact = wandb.Artifact(stem.replace(".", "-"), type="table",
                                  metadata={"profile": self.profile, "commit": built["commit"],
                                            "claims": built["claims"], "seeds": built["seeds"]})
        artifact.add(wb_table, "table")
        self.experiment.log_artifact(artifact)
        self.table_logged = True


# ---------------------------------------------------------------- reading an offline run back

def offline_run_records(run_file: str | Path) -> list[Any]:
    """Every protobuf record of an offline run's `run-<id>.wandb` file (what `wandb sync` would upload)."""
    from wandb.proto import wandb_internal_pb2

    data = Path(run_file).read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    if ident != b":W&B" or magic != 0xBEE1:
        raise ValueError(f"{run_file} is not a wandb run file")
    pos, payload, records = 7, b"", []
    while pos + 7 <= len(data):
        left = LEVELDB_BLOCK - pos % LEVELDB_BLOCK
        if left < 7:  # a block's tail too short for a header is zero padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += left
            continue
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        payload = chunk if kind in (1, 2) else payload + chunk  # 1 full, 2 first, 3 middle, 4 last
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            records.append(record)
    return records


def offline_run_summary(run_file: str | Path) -> dict[str, Any]:
    """Group, tags, job type and final summary of an offline run, read from its run file."""
    out: dict[str, Any] = {"group": None, "tags": [], "summary": {}, "artifacts": []}
    for record in offline_run_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.update(group=record.run.run_group, tags=list(record.run.tags), job_type=record.run.job_type)
        elif kind == "summary":
            for item in record.summary.update:
                key = item.key or "/".join(item.nested_key)
                out["summary"][key] = json.loads(item.value_json)
        elif kind == "artifact":
            out["artifacts"].append((record.artifact.name, record.artifact.type))
    return out
