"""Validation of the sizes that the theory functions take (one job: turn bad input into UserError).

Every public function in ``depthwidth.theory`` checks its sizes through these helpers, so a zero,
negative, fractional or unparsable size gives one clear :class:`~depthwidth.errors.UserError`
line (exit code 2 in the CLI) instead of a wrong number or a traceback.
"""

from __future__ import annotations

import numbers

from depthwidth.errors import UserError
from depthwidth.units import abbreviate

# numpy is imported inside each function, so that modules validating through these helpers
# (theory.accounting, on the `depthwidth query` path) load without it.


def positive_int(value, name: str, *, minimum: int = 1):
    """Return ``value`` as an exact int (or an int64 array) after checking it is whole and >= minimum.

    Scalars come back as Python ``int`` (arbitrary precision, so parameter counts stay exact);
    array-likes come back as ``numpy.int64`` arrays so the accounting formulas broadcast.

    Raises:
        UserError: if any element is not a whole number, is a bool, or is below ``minimum``.
    """
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    if isinstance(value, bool) or isinstance(value, np.bool_):
        raise UserError(f"{name} must be a whole number, got {value!r}")
    if np.ndim(value) == 0:
        if isinstance(value, numbers.Integral):
            out = int(value)
        elif isinstance(value, numbers.Real) and float(value).is_integer():
            out = int(value)
        else:
            raise UserError(f"{name} must be a whole number, got {value!r}")
        if out < minimum:
            raise UserError(f"{name} must be >= {minimum}, got {value!r}")
        return out
    arr = np.asarray(value)
    if arr.size == 0:
        raise UserError(f"{name} is empty")
    if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
        raise UserError(f"{name} must hold whole numbers, got dtype {arr.dtype}")
    if arr.dtype.kind == "f" and not np.all(np.isfinite(arr) & (arr == np.round(arr))):
        raise UserError(f"{name} must hold whole numbers")
    arr = arr.astype(np.int64)
    if np.any(arr < minimum):
        raise UserError(f"{name} must be >= {minimum}, got min {int(arr.min())}")
    return arr


def positive_real(value, name: str) -> float:
    """Return ``value`` as a finite float > 0; raise UserError otherwise."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    try:
        out = float(value)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(out) or out <= 0:
        raise UserError(f"{name} must be a finite number > 0, got {value!r}")
    return out


def heads_divide_width(d_model, n_head) -> None:
    """Raise UserError unless ``n_head`` divides ``d_model`` (head size d_a = d_x / H is whole)."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    if np.any(np.asarray(d_model) % np.asarray(n_head) != 0):
        raise UserError(f"width {abbreviate(d_model)} is not divisible by the number of heads {abbreviate(n_head)}")
