"""One way to call `datasets.load_dataset` for every hub reader: id, config, revision and data folder.

Written for `datasets` 5 (pyproject.toml pins the major). Since `datasets` 4 a repository that holds only a
loading script no longer loads ("Dataset scripts are no longer supported"); the hub's parquet conversion of
such a repository lives on the branch `refs/convert/parquet`, one folder per config. A reader therefore takes

- ``hub_revision``: the branch, tag or commit to read (``refs/convert/parquet`` for a script-only repository);
- ``hub_data_dir``: the folder of the config on that branch (e.g. ``iwslt2017-en-de``). Given a data folder the
  config name is not passed: the parquet branch has no loading script that would know it, and without the folder
  the splits of every config would be mixed (IWSLT 2017: every language pair).

Left unset, both follow `SCRIPT_ONLY`: the script-only ids the readers load are read from their parquet branch
(with the config's folder where the repository has several configs) without a config having to say so, so a
config written before keeps its keys (and its cells their identity). The ids the full profile loads, with the
metadata each setting was checked against (splits, columns, licence, gated or not), are recorded in
tests/fixtures/hub_ids.json (tests/framework/test_hub_ids.py; docs/framework.md lists them).
"""

from __future__ import annotations

from typing import Any

PARQUET_BRANCH = "refs/convert/parquet"
# script-only repositories -> whether their parquet branch holds one folder per config (read: data_dir = config)
SCRIPT_ONLY = {"e9t/nsmc": False, "ptb-text-only/ptb_text_only": True, "IWSLT/iwslt2017": True,
               "eriktks/conll2003": True}


def resolve(hub_id: str, config: str | None = None, revision: str | None = None, data_dir: str | None = None
            ) -> tuple[str | None, str | None, str | None]:
    """(config, revision, data_dir) as given; with neither revision nor data_dir, a script-only id's conversion."""
    if revision is None and data_dir is None and hub_id in SCRIPT_ONLY:
        revision = PARQUET_BRANCH
        data_dir = config if SCRIPT_ONLY[hub_id] else None
    return config, revision, data_dir


def load_kwargs(config: str | None = None, revision: str | None = None, data_dir: str | None = None
                ) -> dict[str, Any]:
    """The keyword arguments of `datasets.load_dataset` for a config / revision / data folder (None: not passed)."""
    kwargs: dict[str, Any] = {}
    if data_dir:
        kwargs["data_dir"] = data_dir          # the config's folder replaces the config name
    elif config:
        kwargs["name"] = config
    if revision:
        kwargs["revision"] = revision
    return kwargs


def describe(hub_id: str, config: str | None = None, revision: str | None = None, data_dir: str | None = None
             ) -> str:
    """`id[/config][@revision][:data_dir]` as it is read (`resolve`), for error lines."""
    config, revision, data_dir = resolve(hub_id, config, revision, data_dir)
    return (hub_id + (f"/{config}" if config and not data_dir else "") + (f"@{revision}" if revision else "")
            + (f":{data_dir}" if data_dir else ""))


def load_hub(hub_id: str, config: str | None = None, *, revision: str | None = None, data_dir: str | None = None,
             **kwargs: Any) -> Any:
    """`datasets.load_dataset(hub_id, ...)` with `load_kwargs` of `resolve`; other keywords (split, ...) pass on."""
    import datasets

    return datasets.load_dataset(hub_id, **load_kwargs(*resolve(hub_id, config, revision, data_dir)), **kwargs)
