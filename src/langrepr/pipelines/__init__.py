"""Every non-gradient cell (`stage: pipeline|stats`), grouped by paper.

`bitcipher/`, `multihot/`, `ewe/`, and the reference rows shared by several papers (`references/`). Training
cells live in `tasks/` (LightningModules only).
"""
