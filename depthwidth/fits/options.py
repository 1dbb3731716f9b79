"""The options of a fit, and their defaults, in one place: ``depthwidth fit``, ``reproduce``,
``figs`` and the library functions (:func:`depthwidth.fits.lawfit.build_fit`,
:func:`depthwidth.fits.transitions.compute_transitions`) all take them from here.

stdlib only (the CLI reads the defaults for its help text).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from depthwidth.errors import UserError
from depthwidth.units import parse_int

PAIRS = ("doubling", "adjacent")  # which depth pairs (fits.transitions.select_pairs)
ASSIGN = ("geom", "arith", "shallow", "deep")  # the depth a transition stands for (assigned_depth)
RESAMPLE = ("paired", "pooled", "seeds", "pooled+widths", "seeds+widths")  # what the bootstrap redraws
MIN_FRACTION = 0.95  # share of bootstrap replicates that must cross for a point to be fitted
# At 100,000 replicates the Monte Carlo error of a 95 % crossing share is 0.07 points; time
# grows linearly (the law-long fit: 10,000 replicates in 9 minutes on a busy 2-core CPU), and
# 1e9 replicates ran a 24 GiB machine out of memory. More only costs time and memory.
MAX_BOOTSTRAP = 100_000

# exp band's defaults (fits.band), here so that building the CLI does not import pandas.
BAND_BUDGETS = "6K,25K,100K"
BAND_TOLERANCE = 1.25  # a shape is "at" B when B/1.25 <= N <= 1.25·B
BAND_WINDOW = 4.5  # slope fit: cells within x4.5 of B, one step of the law's factor-4 grid each side
BAND_BOOTSTRAP = 1000


def _cap_bootstrap(n: int) -> int:
    if n > MAX_BOOTSTRAP:
        se = 100 * math.sqrt(MIN_FRACTION * (1 - MIN_FRACTION) / MAX_BOOTSTRAP)  # binomial, at the 95 % threshold
        raise UserError(f"--bootstrap must be <= {MAX_BOOTSTRAP:,} replicates (the crossing share's Monte Carlo "
                        f"error is then {se:.2f} points; time grows linearly), got {n:,}")
    return n


def parse_bootstrap(text: str | int, *, minimum: int = 2) -> int:
    """``--bootstrap``'s replicate count: a whole number in ``minimum``..:data:`MAX_BOOTSTRAP`
    (UserError, naming the flag, otherwise)."""
    return _cap_bootstrap(parse_int(text, name="--bootstrap", minimum=minimum))


@dataclass(frozen=True)
class FitOptions:
    """How transitions and the law are fitted (meanings in :mod:`depthwidth.fits.transitions`).

    pairs: "doubling" (L, 2L) or "adjacent"; assign: depth of a transition point, "geom"
    sqrt(Ls·Ld), "arith", "shallow" or "deep"; bootstrap: replicates (2 to :data:`MAX_BOOTSTRAP`); resample: what the
    bootstrap redraws, "paired" (the same seeds for every cell, plus the test-set chunks when
    recorded), or residuals from "pooled" (all widths of a depth) or "seeds" (the cell's own),
    "+widths" to also redraw widths; seed: the bootstrap's random seed.

    Not an option here: :func:`depthwidth.fits.lawfit.build_fit`'s ``conventions`` (refit the
    law under every depth-assignment convention, default True; no CLI flag), and the fraction
    of replicates a point must cross in to be fitted, :data:`MIN_FRACTION` (a constant).

    Raises UserError (naming the CLI flag) for a value outside these, at construction, so a
    bad option fails before any training or loading.
    """

    pairs: str = "doubling"
    assign: str = "geom"
    bootstrap: int = 1000
    resample: str = "paired"
    seed: int = 0

    def __post_init__(self) -> None:
        for flag, value, allowed in (("--pairs", self.pairs, PAIRS), ("--assign", self.assign, ASSIGN),
                                     ("--resample", self.resample, RESAMPLE)):
            if value not in allowed:
                raise UserError(f"{flag} must be one of {', '.join(allowed)}, got {value!r}")
        if isinstance(self.bootstrap, bool) or not isinstance(self.bootstrap, int) or self.bootstrap < 2:
            raise UserError(f"--bootstrap must be >= 2 replicates, got {self.bootstrap}")
        _cap_bootstrap(self.bootstrap)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"--seed must be a whole number >= 0, got {self.seed}")

    def kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of ``build_fit`` / ``compute_transitions``."""
        return dataclasses.asdict(self)
