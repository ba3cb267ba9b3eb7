"""The one exception type a user sees as a single line instead of a traceback."""


class UserError(Exception):
    """Bad input the user can fix: the message says what is wrong and how to fix it, in one line.

    Entry points (`langrepr.train`, `langrepr.tables`, data CLIs) catch it, print the line and exit 2.
    """
