"""Existing Hydra launchers whose cells' failures reach the console that started the sweep.

A launcher that runs each cell in another process (joblib's loky workers, submitit jobs) leaves the cell's
`error: ...` line in that process's stream (for submitit, only in `.submitit/<job>/*.err`) and its exit code
behind: a diverged cell's sweep exited 0. These subclasses change nothing in how the cells are run; after the
launch (every cell has run) they print one line per failed cell and exit 2 (`langrepr.scale_out`). An absent
plugin, or SLURM's `sbatch` absent, is one line too instead of a traceback.
"""

from __future__ import annotations

import shutil
import sys
from typing import Any

from hydra.plugins.launcher import Launcher


def _fail(line: str) -> None:
    print(f"error: {line}", file=sys.stderr, flush=True)
    sys.exit(2)


def _missing(package: str, name: str) -> type:
    """A stand-in launcher for an uninstalled plugin: one line on use, not Hydra's "unknown plugin" traceback."""

    class Missing(Launcher):
        def __init__(self, **_: Any) -> None:
            _fail(f"hydra/launcher={name} needs the {package} package: pip install -e . (it is a dependency of "
                  f"langrepr{'[cluster]' if 'submitit' in package else ''})")

        def setup(self, **_: Any) -> None:  # pragma: no cover  (never reached: __init__ exits)
            raise NotImplementedError

        def launch(self, *_: Any) -> Any:  # pragma: no cover
            raise NotImplementedError

    return Missing


class _Reporting:
    """Mixin: after the wrapped launcher's launch, the failed cells' lines here and exit 2."""

    def launch(self, job_overrides, initial_job_idx):  # noqa: ANN001
        from langrepr.scale_out import report_failed_cells

        returns = super().launch(job_overrides, initial_job_idx)  # type: ignore[misc]
        report_failed_cells(returns)
        return returns


try:
    from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher as _Joblib
except ModuleNotFoundError:
    _Joblib = _missing("hydra-joblib-launcher", "joblib")
try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher as _Local
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher as _Slurm
except ModuleNotFoundError:
    _Local = _missing("hydra-submitit-launcher", "submitit_local")
    _Slurm = _missing("hydra-submitit-launcher", "submitit_slurm")


class Joblib(_Reporting, _Joblib):
    """hydra-joblib-launcher: `n_jobs` cells at once, each in its own loky process (packing cells on one GPU)."""


class SubmititLocal(_Reporting, _Local):
    """submitit's local launcher: every cell a local job (submitit pickles this class by name into each job)."""


class SubmititSlurm(_Reporting, _Slurm):
    """submitit's SLURM launcher; on a machine without SLURM one line instead of submitit's 39-line traceback."""

    def launch(self, job_overrides, initial_job_idx):  # noqa: ANN001
        missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
        if missing:
            _fail(f"hydra/launcher=submitit_slurm needs SLURM, and this machine has no {' or '.join(missing)} on PATH: submit from "
                  "the cluster's login node, or run the sweep on this machine with hydra/launcher=submitit_local "
                  "or hydra/launcher=joblib")
        return super().launch(job_overrides, initial_job_idx)
