"""The exception types a user sees as a single line instead of a traceback."""


class UserError(Exception):
    """Bad input the user can fix: the message says what is wrong and how to fix it, in one line.

    Entry points (`langrepr.train`, `langrepr.tables`, data CLIs) catch it, print the line and exit 2.
    """


class Diverged(UserError):
    """Training produced a NaN/inf loss or metric: the cell is recorded as "diverged", not "finished"."""


def one_line(err: BaseException) -> str:
    """An exception as one line (what `metrics.json` records as a failed cell's error)."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if isinstance(err, UserError) else f"{type(err).__name__}: {text}"
