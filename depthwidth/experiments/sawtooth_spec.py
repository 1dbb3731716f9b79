"""What one unit of the trained-sawtooth experiment is (:mod:`depthwidth.experiments.sawtooth_train`
trains and measures it): the architectures, their hidden widths for target depth k, and
:class:`SawtoothSpec`. Kept apart, without numpy, because ``depthwidth exp sawtooth`` builds its
flags from it whenever the CLI's parser is built: importing sawtooth_train there loaded numpy for
every command, ``depthwidth query`` included (0.51 -> 0.31 s wall, measured).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from numbers import Integral

from depthwidth.errors import UserError

ARCHS = ("deep", "shallow_same", "shallow_exact", "shallow_wide", "deep_wide")
CONSTRUCTIONS = ("deep_construction", "shallow_construction")
MAX_K = 10  # shallow_exact has 2^k units and the grid needs >= 4·2^k points: 2^10 keeps it seconds
DEEP_WIDTH = 2  # the construction's width: two ReLUs compute one hat map
SHALLOW_WIDE_FACTOR = 8  # shallow_wide: 8·2^k units (8 units per piece of g^k) ...
SHALLOW_WIDE_CAP = 512  # ... at most 512 but >= 2·2^k (k >= 7): training ∝ units, exact counting ∝ units²
DEEP_WIDE_WIDTH = 8  # deep_wide: k hidden layers of 8 (4× the construction's width)
EVAL_GRID = 65_536


@dataclass(frozen=True)
class SawtoothSpec:
    """One training unit: target depth ``k`` (g^k), architecture ``arch`` (:data:`ARCHS`),
    ``seed``, ``steps`` full-batch Adam steps at peak learning rate ``lr`` (cosine to 0), on
    ``grid`` + 1 points; errors measured on ``eval_grid`` + 1 points. Raises UserError."""

    k: int
    arch: str
    seed: int = 0
    steps: int = 3000
    lr: float = 1e-2
    grid: int = 4096
    eval_grid: int = EVAL_GRID

    def __post_init__(self):
        check_depth(self.k)
        if self.arch not in ARCHS:
            raise UserError(f"architecture must be one of {', '.join(ARCHS)}, got {self.arch!r}")
        if self.steps < 1 or self.seed < 0:
            raise UserError(f"steps must be >= 1 and seed >= 0, got {self.steps}, {self.seed}")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise UserError(f"lr must be a positive number, got {self.lr}")
        for name in ("grid", "eval_grid"):
            n = getattr(self, name)
            if n % 2**self.k or n < 4 * 2**self.k:
                raise UserError(f"{name} must be a multiple of 2^k and >= 4·2^k (k = {self.k}), got {n}")

    def to_dict(self) -> dict:
        """The record's spec: every field plus the fixed choices (optimizer, schedule, init)."""
        return {**asdict(self), "hidden": hidden_widths(self.k, self.arch), "optimizer": "adam",
                "schedule": "cosine", "init": "he-normal weights, U(-1,1)/fan_in biases", "loss": "mse"}


def check_depth(k) -> int:
    """k as an int in 1..MAX_K, else UserError."""
    if isinstance(k, bool) or not isinstance(k, Integral) or not 1 <= k <= MAX_K:
        raise UserError(f"depth k must be a whole number in 1..{MAX_K}, got {k!r}")
    return int(k)


def hidden_widths(k: int, arch: str) -> list[int]:
    """Hidden-layer widths: deep [2]*k; shallow_same [2k] (3u + 1 = 6k + 1 ⇒ u = 2k);
    shallow_exact [2^k]; shallow_wide [min(8·2^k, max(512, 2·2^k))]; deep_wide [8]*k; the constructions as
    their trained counterparts."""
    k = check_depth(k)
    return {"deep": [DEEP_WIDTH] * k, "deep_construction": [DEEP_WIDTH] * k, "shallow_same": [2 * k],
            "shallow_exact": [2**k], "shallow_construction": [2**k],
            "shallow_wide": [min(SHALLOW_WIDE_FACTOR * 2**k, max(SHALLOW_WIDE_CAP, 2 * 2**k))],
            "deep_wide": [DEEP_WIDE_WIDTH] * k}[arch]
