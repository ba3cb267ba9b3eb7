"""Cost plan of a profile before any GPU is paid for: `python -m langrepr.plan [--profile full] [--table T]`.

For every cell of a table's sweep (expanded as Hydra's basic sweeper expands `hydra.sweeper.params`, each cell
composed with `hydra.compose` and validated as `python -m langrepr.train` validates it) the plan lists what the
cell trains: parameters, training examples, FLOPs per optimiser step, steps, projected GPU time at a stated
sustained throughput, and peak memory under fp16 mixed precision with "fits 24 GB" and the gradient accumulation
that fits. Non-gradient cells (reference rows, token-list counts, Bit Cipher co-occurrence and probes) are listed
with their CPU nature and no GPU time. Writes `outputs/plan/<table>.{md,json}` and `outputs/plan/all.md`.

How each number is made: `langrepr.plan.render.METHOD` (also printed in every plan). The package, by role:
facts (GPU peaks, downloads, and the reader of each dataset config's `about:` node: sizes, labels), workload,
cells (sweep -> cells -> stages), measure (FLOPs), memory, timing, table, render, cli.
"""

from __future__ import annotations

from langrepr.plan.cells import (  # noqa: F401
    _eval_forwards,
    _sel,
    _steps,
    cell_name,
    compose,
    compose_cell,
    cpu_nature,
    data_needs,
    dataset_name,
    extra_sweeps,
    grid_composition,
    grid_workload,
    multihot_shape,
    multihot_stages,
    multihot_train_workload,
    stages,
    sweep_cells,
    train_stage,
)
from langrepr.plan.cli import _Parser, check_arguments, committed_settings, main, tables  # noqa: F401
from langrepr.plan.facts import (  # noqa: F401
    COOCCURRENCE_TOKENS_PER_CPU_S,
    DATASET_DOWNLOAD,
    DEFAULT_UTILISATION,
    FACTS_HOME,
    GIB,
    GPU_CLASSES,
    GPU_JSON_DIR,
    OUT_DIR,
    PEAK_SOURCE,
    PEAK_TFLOPS,
    RESERVE_GIB,
    about,
    downloads,
    labels_of,
    peak_for,
    size_of,
    token_list_size,
)
from langrepr.plan.measure import _MEASURED, measure, rnn_flops  # noqa: F401
from langrepr.plan.memory import accumulation, memory_bytes, saved_activation_bytes  # noqa: F401
from langrepr.plan.render import METHOD, _bound, _gb, _hours, _num, render_all, render_table  # noqa: F401
from langrepr.plan.table import plan_table, portable_fingerprint, settings, totals, unique_stages  # noqa: F401
from langrepr.plan.timing import (  # noqa: F401
    FLOOR_FROM_KIND,
    Assumption,
    GpuCheck,
    _packed_slowdown,
    assumption_for,
    load_checks,
    nearest_check,
    project,
)
from langrepr.plan.workload import Stage, Workload  # noqa: F401
