"""Config validation before any data is read: one line per mistake, with the fix.

Why: a typo (`+optimzer.lr=0.1`) or an out-of-range value (`trainer.max_epochs=-1`) used to be accepted
silently or to fail minutes later inside Lightning with a traceback. Everything here looks only at the
composed config and the hardware, so it runs in milliseconds, before the data is touched.

Unknown keys are found two ways: top-level keys must be declared by `conf/train.yaml` or by a global
config file (experiments, profiles, debug); keys of a node with `_target_` must be parameters of that
callable (unless it takes `**kwargs`). The closest valid key is suggested.

The package, by role: `keys` (unknown keys and their closest valid key), `values` (numbers, trainer
and hardware), `settings` (pipeline and newer-paper settings by name, and `validate_config`), `command_line`
(the overrides checked and composed before Hydra runs).
"""

from __future__ import annotations

from langrepr.validation.command_line import (  # noqa: F401
    _COMPOSED,
    _compose,
    _composition_error,
    _first_values,
    _flat_keys,
    _plus_for_target_arguments,
    _through_interpolation,
    canonical_overrides,
    check_command_line,
    check_seeds,
    check_writable,
    setting_key,
)
from langrepr.validation.keys import (  # noqa: F401
    GLOBAL_GROUPS,
    HYDRA_KEYS,
    PRECISIONS,
    STAGES,
    TEST_CKPTS,
    TRAINER_SET_BY_ENTRY,
    _check_target_keys,
    _parameters,
    check_keys,
    closest,
    known_top_level_keys,
    target_arguments,
    trainer_arguments,
)
from langrepr.validation.settings import (  # noqa: F401
    CHOICES,
    DROPOUTS,
    FRACTIONS,
    LEAM_TARGET,
    MAX_PER_OFFSET_WIDTH,
    NON_NEGATIVE,
    POSITIVE,
    PROBE_TASKS,
    SETTING_ROOTS,
    WHOLE_AT_LEAST_0,
    WHOLE_AT_LEAST_1,
    _fraction,
    _setting_keys,
    check_grid_model,
    check_leam_class_names,
    check_pipeline_values,
    check_supported_dataset,
    check_values,
    validate_config,
)
from langrepr.validation.values import (  # noqa: F401
    _batches_limit,
    _get,
    _int,
    _number,
    _positive_float,
    check_canine_length,
    check_hardware,
    check_trainer_values,
)



