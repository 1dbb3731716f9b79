"""The options of a fit, and their defaults, in one place: ``depthwidth fit``, ``reproduce``,
``figs`` and the library functions (:func:`depthwidth.fits.lawfit.build_fit`,
:func:`depthwidth.fits.transitions.compute_transitions`) all take them from here.

stdlib only (the CLI reads the defaults for its help text).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from depthwidth.errors import UserError

PAIRS = ("doubling", "adjacent")  # which depth pairs (fits.transitions.select_pairs)
ASSIGN = ("geom", "arith", "shallow", "deep")  # the depth a transition stands for (assigned_depth)
RESAMPLE = ("paired", "pooled", "seeds", "pooled+widths", "seeds+widths")  # what the bootstrap redraws
MIN_FRACTION = 0.95  # share of bootstrap replicates that must cross for a point to be fitted

# exp band's defaults (fits.band), here so that building the CLI does not import pandas.
BAND_BUDGETS = "6K,25K,100K"
BAND_TOLERANCE = 1.25  # a shape is "at" B when B/1.25 <= N <= 1.25·B
BAND_WINDOW = 4.5  # slope fit: cells within x4.5 of B, one step of the law's factor-4 grid each side
BAND_BOOTSTRAP = 1000


@dataclass(frozen=True)
class FitOptions:
    """How transitions and the law are fitted (meanings in :mod:`depthwidth.fits.transitions`).

    pairs: "doubling" (L, 2L) or "adjacent"; assign: depth of a transition point, "geom"
    sqrt(Ls·Ld), "arith", "shallow" or "deep"; bootstrap: replicates (>= 2); resample: what the
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
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise UserError(f"--seed must be a whole number >= 0, got {self.seed}")

    def kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of ``build_fit`` / ``compute_transitions``."""
        return dataclasses.asdict(self)
