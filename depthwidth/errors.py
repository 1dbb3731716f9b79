"""The exception types for errors that are not bugs.

The CLI maps :class:`UserError` to a single line on stderr and its ``exit_code`` (2: bad input;
1 for :class:`StorageFull`); anything else is a bug and keeps its traceback.
"""


import errno

# errno values that mean the disk (or a quota, or a file-size limit) ran out, not bad input
NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def chain(e: BaseException | None):
    """``e`` and the exceptions it was raised from or during (__cause__, else __context__), once each."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


class UserError(Exception):
    """Bad input from the user (a flag, a file, a config value). The message is one line."""

    exit_code = 2


class StorageFull(UserError):
    """The disk (or a quota, or a file-size limit) ran out while results were being written.

    Not bad input, so the CLI exits 1; finished results are intact, and a run resumes from its
    last complete checkpoint once there is space.
    """

    exit_code = 1
