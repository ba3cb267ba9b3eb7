"""The exception types a user sees as a single line instead of a traceback."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sys
from collections.abc import Iterator

# torch's zip writer turns a failed write (a full disk) into a RuntimeError; the OSError, when there is one, is
# only its __context__ ("[enforce fail at inline_container.cc:672] . unexpected pos ...", or, writing to a path,
# "PytorchStreamWriter failed writing file data/0: file write failed")
TORCH_WRITE_FAILED = re.compile(r"PytorchStreamWriter failed writing|file write failed|unexpected pos|"
                                r"inline_container\.cc")
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO)


class UserError(Exception):
    """Bad input the user can fix: the message says what is wrong and how to fix it, in one line.

    Entry points (`langrepr.train`, `langrepr.tables`, data CLIs) catch it, print the line and exit 2.
    """


def unknown_choice(what: str, choice: str, options: list[str]) -> str:
    """The closest options first, the full list on a second line ("did you mean bert_ewe?").

    Short first, because that is the line a user reads: 41 model names in one line hide the one suggestion that
    matters.
    """
    import difflib

    near = difflib.get_close_matches(choice, options, n=3, cutoff=0.5)
    if not near:   # nothing close: the list is the one thing to say
        return f"unknown {what} '{choice}': choose one of {', '.join(options)}"
    return f"unknown {what} '{choice}': did you mean {' or '.join(near)}?\n  all {what} options: {', '.join(options)}"


class Diverged(UserError):
    """Training produced a NaN/inf loss or metric: the cell is recorded as "diverged", not "finished"."""


@contextlib.contextmanager
def exits_on_user_error(code: int = 2) -> Iterator[None]:
    """For a command's main: a UserError inside becomes `error: <its line>` on stderr and exit `code`."""
    try:
        yield
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(code)


def one_line(err: BaseException) -> str:
    """An exception as one line (what `metrics.json` records as a failed cell's error)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if isinstance(err, UserError) else f"{type(err).__name__}: {text}"


def write_failure(err: BaseException) -> str | None:
    """Why a write failed ('No space left on device', ...) when `err` is a failed write; None otherwise.

    Looks through the exception's cause/context chain for the OSError, so torch.save's RuntimeError on a full
    disk is recognised as what it is.
    """
    seen: list[BaseException] = []
    cause: BaseException | None = err
    while cause is not None and all(cause is not s for s in seen):
        seen.append(cause)
        if isinstance(cause, OSError) and cause.errno in WRITE_ERRNOS:
            return cause.strerror or os.strerror(cause.errno)
        cause = cause.__cause__ or cause.__context__
    if isinstance(err, RuntimeError) and TORCH_WRITE_FAILED.search(str(err)):
        return f"the write failed ({' '.join(str(err).split())[:120]})"
    return None
