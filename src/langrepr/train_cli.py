"""`python -m langrepr.train` before Hydra: group choices, --options, and one line for errors a user can act on."""

from __future__ import annotations

import errno
import re

from hydra.errors import InstantiationException

from langrepr.build import build_cell, task_kwargs  # noqa: F401  (task_kwargs: imported from here)
from langrepr.confpaths import config_groups, group_options
from langrepr.errors import UserError, unknown_choice, write_failure

# every config group a command line may choose (the grid's input / encoder / grid_task included); hydra/* is Hydra's
CONFIG_GROUPS = tuple(g for g in config_groups() if g != "hydra")

# ---------------------------------------------------------------- CLI

def check_group_choices(argv: list[str]) -> None:
    """Catch `model=no_such_model` before Hydra does, with one line that lists the valid choices."""
    for arg in argv:
        key, sep, value = arg.lstrip("+~").partition("=")
        if not sep or key not in CONFIG_GROUPS or value in ("", "null"):
            continue
        options = group_options(key)
        for choice in value.split(","):
            if choice.startswith(("glob(", "choice(", "range(")):
                continue
            if choice not in options:
                raise UserError(unknown_choice(key, choice, options))


# exceptions of requests / huggingface_hub that mean "the hub is not reachable" without subclassing ConnectionError
HUB_ERRORS = frozenset({"OfflineModeIsEnabled", "ConnectTimeout", "ConnectionError", "LocalEntryNotFoundError"})


def hydra_options() -> frozenset[str]:
    """The --options Hydra's own command line takes (--help, --cfg, -m, ...)."""
    try:
        from hydra._internal.utils import get_args_parser

        return frozenset(get_args_parser()._option_string_actions)
    except Exception:  # noqa: BLE001  (a private API: fall back to Hydra 1.3's list)
        return frozenset({"--cfg", "--config-dir", "--config-name", "--config-path", "--experimental-rerun", "--help",
                          "--hydra-help", "--info", "--multirun", "--package", "--resolve", "--run",
                          "--shell-completion", "--version", "-c", "-cd", "-cn", "-cp", "-h", "-i", "-m", "-p", "-r",
                          "-sc"})


def check_options(argv: list[str]) -> None:
    """`--profile quick` is not how this command takes settings: say `profile=quick` (issue 21 c22)."""
    known = hydra_options()
    for i, arg in enumerate(argv):
        name, eq, value = arg.partition("=")
        if not arg.startswith("-") or name in known or arg == "-" or arg[1:2].isdigit():
            continue
        key = name.lstrip("-")
        if not eq and i + 1 < len(argv) and not argv[i + 1].startswith("-") and "=" not in argv[i + 1]:
            value = argv[i + 1]
        raise UserError(f"unknown option '{name}': this command takes key=value overrides, not --options: write "
                        f"{key}={value or '<value>'} (`python -m langrepr.train --help` lists Hydra's own options)")


def _causes(err: BaseException) -> list[BaseException]:
    """The error and what it was raised from (`raise ... from`), outermost first; not what it was raised *during*."""
    seen: list[BaseException] = []
    while err is not None and all(err is not s for s in seen):
        seen.append(err)
        err = err.__cause__
    return seen


def _target_of(err: BaseException) -> str:
    """The `_target_` a Hydra InstantiationException names ("Error in call to target 'x.y'"), else 'this cell'."""
    found = re.search(r"target '([^']+)'", str(err))
    return found.group(1) if found else "this cell"


def user_message(err: BaseException) -> str | None:
    """The one line for errors a user can act on; None for bugs (those keep their traceback)."""
    if isinstance(err, UserError):
        return str(err)
    if isinstance(err, InstantiationException) and isinstance(err.__cause__, (ValueError, UserError)):
        return str(err.__cause__)   # a constructor rejected a config value; its message names the key
    chain = _causes(err)
    missing = next((e for e in chain if isinstance(e, ModuleNotFoundError) and e.name), None)
    if missing is not None:        # e.g. kiwipiepy without its model package (issue 21 X23)
        return (f"{_target_of(err)} needs the Python module '{missing.name}', which is not installed: "
                f"pip install {missing.name.split('.')[0]} (`make install` installs the project's dependencies)")
    offline = next((e for e in chain if isinstance(e, ConnectionError) or type(e).__name__ in HUB_ERRORS), None)
    if offline is not None:        # a hub download with no network or HF_*_OFFLINE=1 (issue 21 X25)
        return (f"{_target_of(err)} could not reach the Hugging Face Hub ({type(offline).__name__}: "
                f"{' '.join(str(offline).split())[:120]}): go online (unset HF_HUB_OFFLINE and HF_DATASETS_OFFLINE), "
                "or point the cell's data settings at local copies (LANGREPR_DATA_DIR)")
    if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM):
        return (f"cannot write {err.filename or 'the output'}: {err.strerror}; free disk space or point "
                "paths.output_root at a writable folder (completed files were written atomically)")
    failed = write_failure(err)   # e.g. torch.save of a data cache on a full disk: a RuntimeError around the OSError
    if failed:
        return (f"a write failed: {failed}; free disk space or point paths.output_root / paths.cache_dir at a "
                "writable folder, then rerun with ckpt_path=auto (completed files were written atomically)")
    return None
