"""A word-level LM corpus whose hub release names its splits differently (BabyLM: train / dev / test).

Same blocks, vocabulary and cache as `langrepr.data.english.text_lm.TextLMDataModule`; only the hub split
names are mapped (``hub_splits: {validation: dev}``). A local copy is read from ``data_dir``/``files`` as there.
"""

from __future__ import annotations

from langrepr.data.english.text_lm import TextLMDataModule, read_hub_lines


class HubSplitTextLMDataModule(TextLMDataModule):
    """`TextLMDataModule` with the hub split names mapped (``hub_splits``: our split -> the hub's)."""

    def __init__(self, *args: object, hub_splits: dict[str, str] | None = None, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.hub_splits = dict(hub_splits or {})

    def _lines(self, split: str) -> list[str]:
        if self.data_dir is not None:
            return super()._lines(split)
        return read_hub_lines(self.hub_name, self.hub_config, self.hub_splits.get(split, split), self.text_field,
                              self.hub_revision, self.hub_data_dir)
