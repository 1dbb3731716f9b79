"""Parsing of human-written counts: ``175e9``, ``175B``, ``1.3M``, ``1T``, ``85_056_000``."""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation

from depthwidth.errors import UserError

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}


def _exact(text: str | int | float, name: str) -> Decimal:
    """The exact value of a count's text (a Decimal, so 100000000000000001 stays itself)."""
    if isinstance(text, int) and not isinstance(text, bool):
        return Decimal(text)
    if isinstance(text, float):
        return Decimal(text) if math.isfinite(text) else Decimal("NaN")
    s = str(text).strip().replace("_", "").replace(",", "")
    suffix = s[-1:].upper() if s and s[-1:].isalpha() and s[-1:].upper() in _SUFFIX else ""
    body = s[: len(s) - len(suffix)] if suffix else s
    try:
        value = Decimal(body) * _SUFFIX[suffix]
    except InvalidOperation:
        raise UserError(f"cannot parse {name} {abbreviate(text)!r}: expected a number (e.g. 3, 2.5, 85_056_000, "
                        "or with a suffix K/M/B/T: 1.3M, 175B)") from None
    return value


def parse_count(text: str | int | float, *, name: str = "count", positive: bool = True) -> float:
    """Parse a count such as ``175B`` (1.75e11), ``1.3M``, ``1T``, ``175e9`` or ``85_056_000``.

    Suffixes (case-insensitive): K = 1e3, M = 1e6, B or G = 1e9, T = 1e12.

    Returns a float (a count that a float cannot hold exactly, above 2**53, is rounded: where the
    output claims exactness, use :func:`parse_int` or :func:`parse_exact_count`).
    Raises UserError (one line naming ``name``) if the text does not parse, is not finite, or
    (with ``positive=True``) is not > 0, or is > 0 but too small for a float (it would be 0).
    """
    exact = _exact(text, name)
    value = float(exact) if exact.is_finite() else math.nan
    if not math.isfinite(value):
        raise UserError(f"{name} must be finite, got {abbreviate(text)!r}")
    if positive and value == 0 and exact > 0:  # e.g. 1e-400: a float has nothing that small
        raise UserError(f"{name} {abbreviate(text)!r} is too small: it underflows to 0 as a float "
                        "(the smallest positive one is ~5e-324)")
    if positive and value <= 0:
        raise UserError(f"{name} must be positive, got {abbreviate(text)!r}")
    return value


def parse_exact_count(text: str | int | float, *, name: str = "count") -> int | float:
    """A positive count as :func:`parse_count` reads it, but a whole one as an exact ``int``
    (``123456789012345678901`` stays itself; through a float it would end in ...683,968);
    a fractional one (``2.5``) as a float. UserError as :func:`parse_count`."""
    value = parse_count(text, name=name)
    exact = _exact(text, name)
    return int(exact) if exact == exact.to_integral_value() else value


def parse_int(text: str | int, *, name: str = "value", minimum: int = 1) -> int:
    """Parse a whole number (suffixes as in :func:`parse_count`), exactly: an ``int`` of any size
    (``100000000000000001`` is not rounded to 1e17). UserError if it is not whole or < ``minimum``."""
    parse_count(text, name=name, positive=False)  # the parse and finiteness errors
    exact = _exact(text, name)
    if exact != exact.to_integral_value():
        raise UserError(f"{name} must be a whole number, got {abbreviate(text)!r}")
    if exact < minimum:
        raise UserError(f"{name} must be >= {minimum}, got {abbreviate(text)!r}")
    return int(exact)


# Digits up to which an integer is printed whole (with thousands separators); a longer one is
# abbreviated, so that one output line or error stays one readable line.
WHOLE_DIGITS = 40


def abbreviate(x: object, digits: int = WHOLE_DIGITS) -> str:
    """``x`` for a message: an int of more than ``digits`` digits as ``1.0000e+300 (301 digits)``,
    a longer text cut to its first and last 12 characters; anything else as ``str``."""
    if isinstance(x, int) and not isinstance(x, bool):
        n = len(str(abs(x)))
        return f"{x:,}" if n <= digits else f"{Decimal(x):.4e} ({n} digits)"
    text = str(x)
    return text if len(text) <= 2 * digits else f"{text[:12]}...{text[-12:]} ({len(text)} characters)"


def parse_float(text: str | float, *, name: str = "value", above: float = 0.0, what: str = "") -> float:
    """Parse a plain finite number that must exceed ``above``; UserError (one line) otherwise.
    ``what`` names the kind of number in the error (e.g. "a factor")."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        raise UserError(f"{name} must be a number, got {text!r}") from None
    if not (math.isfinite(v) and v > above):
        raise UserError(f"{name} must be {what + ' ' if what else ''}> {above:g}, got {text!r}")
    return v


def _items(text: str, name: str, unique: bool) -> list[str]:
    """The comma-separated elements of ``text``; UserError for none, an empty one ("3,,4", a
    trailing comma: usually a typo, not a shorter list) or, with ``unique``, a repeated one."""
    items = [t.strip() for t in str(text).split(",")]
    if not any(items):
        raise UserError(f"{name} is empty")
    if "" in items:
        raise UserError(f"{name} has an empty element: {text!r}")
    if unique and len(set(items)) < len(items):
        raise UserError(f"{name} repeats an element: {text!r}")
    return items


def parse_int_list(text: str, *, name: str = "list", minimum: int = 1, unique: bool = False) -> list[int]:
    """Parse ``"3,12,27"`` into ``[3, 12, 27]``; raise UserError on an empty, bad or (with
    ``unique``) repeated element (one that is not a number says what a list looks like)."""
    out = []
    for t in _items(text, name, unique):
        try:
            out.append(parse_int(t, name=name, minimum=minimum))
        except UserError as e:
            if not str(e).startswith("cannot parse"):
                raise
            raise UserError(f"cannot parse {name} {abbreviate(t)!r}: expected whole numbers separated by commas, "
                            f"e.g. {minimum},{minimum + 1},{minimum + 2}") from None
    return out


def parse_count_list(text: str, *, name: str = "list", unique: bool = False) -> list[float]:
    """Parse ``"125M,1.3B,175B"`` into floats; raise UserError on an empty, bad or (with
    ``unique``) repeated element."""
    return [parse_count(t, name=name) for t in _items(text, name, unique)]


_UNITS = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"), (1.0, ""))


def format_count(x: float | None) -> str:
    """175e9 -> '175B', 1.3e9 -> '1.3B', 84934656 -> '84.9M', 12345 -> '12.3K' (3 significant
    digits; the inverse of :func:`parse_count` up to rounding); '-' for None or non-finite.

    The unit is chosen after rounding, so 999999.99 is '1M' (not '1e+03K') and 999.9 is '1K';
    from 1e15 on the count is plain scientific notation ('1e+30').
    The one count formatter of the package (CLI tables, summaries, figure labels).
    """
    if x is None or not math.isfinite(x):
        return "-"
    if abs(float(f"{x:.3g}")) >= 1e15:  # past 999T a suffix no longer helps: '1e+30', not '1e+18T'
        return f"{x:.3g}"
    for i, (div, suf) in enumerate(_UNITS):
        if abs(x) >= div or div == 1.0:
            if i > 0 and abs(float(f"{x / div:.3g}")) >= 1000:  # rounds up into the next unit
                div, suf = _UNITS[i - 1]
            return f"{x / div:.3g}{suf}"
    raise AssertionError("unreachable")


def format_level(level: float) -> str:
    """A confidence level in (0, 1) as a percentage with every digit it was given: 0.95 -> '95%',
    0.9 -> '90%', 0.9999999 -> '99.99999%' (``f"{level:.0%}"`` would print '100%'). The digits are
    those of the float's shortest repr, shifted two places, so nothing is rounded."""
    return f"{(Decimal(repr(float(level))) * 100).normalize():f}%"
