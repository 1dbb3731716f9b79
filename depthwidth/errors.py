"""The one exception type for user errors.

The CLI maps :class:`UserError` to a single line on stderr and exit code 2; anything else is a
bug and keeps its traceback.
"""


class UserError(Exception):
    """Bad input from the user (a flag, a file, a config value). The message is one line."""
