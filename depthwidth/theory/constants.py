"""The one provenance table of constants in the separation-rank bounds (Levine et al. 2020).

docs/concepts.md gives the published bounds *(reconstructed)*: their functional forms are right, the
constants may differ from the paper's Theorems 1 and 2 (arXiv 2006.12467). Every constant that
enters :mod:`depthwidth.theory.separation` and :mod:`depthwidth.theory.symbolic` is read from
``CONSTANTS`` below, so a checked value from the paper replaces one row here and nothing else.
Values are exact rationals (``fractions.Fraction``) so the symbolic forms stay exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class Constant:
    """One constant: its value, the expression it sits in, where it came from, and whether checked."""

    name: str
    value: Fraction
    appears_in: str
    provenance: str
    reconstructed: bool


_PUBLISHED = "published-form bounds of Levine et al. 2020 (arXiv 2006.12467), Theorems 1 and 2; docs/concepts.md"

CONSTANTS: dict[str, Constant] = {
    c.name: c
    for c in (
        Constant(
            "base",
            Fraction(3),
            "L_th = log_base(d_x); every log in the bounds",
            "each attention layer is a degree-3 polynomial of its input (Levine et al. 2020, §3)",
            reconstructed=False,
        ),
        Constant(
            "lower_efficient_exponent_offset",
            Fraction(2),
            "3^(L - c) * (log3(d_x - H) + a_L), L <= log3 d_x",
            _PUBLISHED,
            reconstructed=True,
        ),
        Constant(
            "a_L_constant", Fraction(2), "a_L = c - c' * log3(2) - c'' * L", _PUBLISHED, reconstructed=True
        ),
        Constant(
            "a_L_log3_2_coefficient",
            Fraction(1),
            "a_L = c - c' * log3(2) - c'' * L",
            _PUBLISHED,
            reconstructed=True,
        ),
        Constant(
            "a_L_depth_coefficient",
            Fraction(1),
            "a_L = c - c' * log3(2) - c'' * L",
            _PUBLISHED,
            reconstructed=True,
        ),
        Constant(
            "upper_efficient_factor",
            Fraction(1, 2),
            "c * (3^L - 1) * log3(d_x + H), L <= log3 d_x; (3^L - 1)/2 position indices summed",
            _PUBLISHED,
            reconstructed=True,
        ),
        Constant(
            "lower_inefficient_scale",
            Fraction(1),
            "c * (d_x - H) * (L - log3(d_x - H)), L > log3 d_x; the published form gives only 'proportional to'",
            _PUBLISHED,
            reconstructed=True,
        ),
        Constant(
            "upper_inefficient_scale",
            Fraction(1),
            "c * d_x * (L + c' * log3(d_x + H)), L > log3 d_x; the published form gives only 'proportional to'",
            _PUBLISHED,
            reconstructed=True,
        ),
        Constant(
            "upper_inefficient_log_coefficient",
            Fraction(2),
            "c * d_x * (L + c' * log3(d_x + H)), L > log3 d_x",
            _PUBLISHED,
            reconstructed=True,
        ),
    )
}


def value(name: str) -> Fraction:
    """The value of constant ``name`` (KeyError if the table has no such row)."""
    return CONSTANTS[name].value


def table() -> list[dict]:
    """The table as JSON-ready rows: name, value (str, exact), appears_in, provenance, reconstructed."""
    return [
        {
            "name": c.name,
            "value": str(c.value),
            "appears_in": c.appears_in,
            "provenance": c.provenance,
            "reconstructed": c.reconstructed,
        }
        for c in CONSTANTS.values()
    ]
