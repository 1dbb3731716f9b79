"""Synthetic sweep results with a known transition law, for validating ``depthwidth fit``.

Loss surface (nats/token) for a model of depth L and non-embedding size N = 12·L·d²::

    loss(N, L) = E + A·N^(-alpha) + c·(g(L) - g(L*(N)))²  +  seed noise ~ Normal(0, noise²)

where L*(N) is the true optimal depth, the root of N = 12·L·exp(2a + 2b·L) (the law
ln d_x = a + b·L read as in :mod:`depthwidth.fits.projections`; with ``form="log-depth"`` the law
ln d_x = a + b·ln L and N = 12·L·exp(2a + 2b·ln L), any form of :mod:`depthwidth.fits.forms`), and g = ln (``symmetry="log"``,
default) or g(L) = L/L*(N) (``symmetry="linear"``). The first two terms are a Kaplan-style size
law shared by all depths; the last makes every depth worse the further it is from the optimum.

Where two depths cross: at equal N, loss(L_s) = loss(L_d) iff g(L*) is the midpoint of g(L_s)
and g(L_d), i.e. L* = sqrt(L_s·L_d) for "log" and (L_s + L_d)/2 for "linear". So a doubling pair
(L, 2L) crosses exactly at N* = 12·L'·exp(2a + 2b·L') with L' = sqrt(2)·L ("log"), and the
width there at depth L' is exp(a + b·L'): fitting with ``--assign geom`` ("log") or
``--assign arith`` ("linear") and ``--law-form`` the surface's form must recover (a, b). Below N* the deeper one is further from the
optimum (worse); above it, nearer (better), the sign pattern the transition finder expects.

Records are real ``record.json`` files, :class:`depthwidth.records.Record` of kind "train"
written with :func:`depthwidth.records.write_record`; config.data.corpus is "synthetic" and
device "synthetic" so they cannot be mistaken for trained runs.
"""

from __future__ import annotations

import datetime as _dt
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth import storage
from depthwidth.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from depthwidth.errors import UserError
from depthwidth.fits.forms import DEFAULT_FORM, form_named
from depthwidth.fits.law import Law
from depthwidth.fits.projections import optimal_depth, transition_params
from depthwidth.records import Record, params_of, write_record
from depthwidth.theory.accounting import kaplan_n, width_for_budget


@dataclass(frozen=True)
class Surface:
    """Parameters of the synthetic loss surface (module docstring). a, b: the true law;
    E, A, alpha: size law (nats/token, N in parameters); c: depth penalty (nats per unit of
    g²); noise: seed standard deviation (nats/token); symmetry: "log" or "linear"; form: the
    true law's form (a key of :data:`depthwidth.fits.forms.FORMS`)."""

    a: float = 4.0
    b: float = 0.08
    E: float = 1.5
    A: float = 30.0
    alpha: float = 0.25
    c: float = 0.08
    noise: float = 0.003
    symmetry: str = "log"
    form: str = DEFAULT_FORM

    def law(self) -> Law:
        return Law(self.a, self.b, None, None, "synthetic-truth", "depthwidth.fits.synthetic",
                   form=form_named(self.form))

    def optimal_depth(self, N: float) -> float:
        return optimal_depth(N, self.law())

    def loss(self, N: float, L: float) -> float:
        """Noise-free loss of depth L at size N (module docstring)."""
        Lo = self.optimal_depth(N)
        if self.symmetry == "log":
            pen = (math.log(L) - math.log(Lo)) ** 2
        elif self.symmetry == "linear":
            pen = ((L - Lo) / Lo) ** 2
        else:
            raise UserError(f"symmetry must be 'log' or 'linear', got {self.symmetry!r}")
        return self.E + self.A * N ** (-self.alpha) + self.c * pen

    def true_transition(self, L_s: float, L_d: float) -> float:
        """Exact N* where depths L_s and L_d cross (module docstring)."""
        Lm = math.sqrt(L_s * L_d) if self.symmetry == "log" else 0.5 * (L_s + L_d)
        return transition_params(Lm, self.law())


def write_synthetic(results: str | Path, surface: Surface = Surface(), *, depths=(2, 4, 8, 16, 32),
                    n_seeds: int = 3, n_head: int = 2, vocab_size: int = 256, seq_len: int = 64,
                    N_range: tuple[float, float] | None = None, per_decade: int = 6, seed: int = 0,
                    diverged: int = 0, unfinished: int = 0) -> dict[str, Any]:
    """Write a synthetic sweep under ``results/runs/`` and return what was written.

    For each depth, widths are the multiples of n_head nearest sqrt(N/(12·L)) over a geometric
    grid of N (``per_decade`` points per decade over N_range; default: from a quarter of the
    first doubling pair's true N* to four times the last one's). Each (depth, width) gets
    n_seeds records with independent Normal(0, noise²) seed noise (numpy Generator, ``seed``).
    ``diverged`` extra records per depth get status "diverged" and test_loss null, and
    ``unfinished`` run directories get only a config.json (both must be excluded by the table).

    Returns {"a", "b", "surface", "depths", "n_records", "n_diverged", "n_unfinished",
    "true_transitions": [{"L_s", "L_d", "N_star"}...]}.
    """
    depths = sorted(int(L) for L in depths)
    if len(depths) < 2 or depths[0] < 1:
        raise UserError("synthetic sweep needs at least 2 positive depths")
    pairs = list(zip(depths, depths[1:]))
    truths = [{"L_s": s, "L_d": d, "N_star": surface.true_transition(s, d)} for s, d in pairs]
    if N_range is None:
        N_range = (truths[0]["N_star"] / 4.0, truths[-1]["N_star"] * 4.0)
    n_pts = max(2, int(round(per_decade * math.log10(N_range[1] / N_range[0]))) + 1)
    grid = np.geomspace(N_range[0], N_range[1], n_pts)
    rng = np.random.default_rng(seed)
    now = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    n_written = n_div = 0
    for L in depths:
        widths = sorted({max(n_head, n_head * int(round(width_for_budget(N, L) / n_head))) for N in grid})
        for d in widths:
            N = float(kaplan_n(L, d))
            mean = surface.loss(N, L)
            for s in range(n_seeds):
                _write_record(results, L, d, n_head, vocab_size, seq_len, s, "finished",
                              mean + surface.noise * float(rng.standard_normal()), now)
                n_written += 1
        for k in range(diverged):
            d = widths[k % len(widths)]
            _write_record(results, L, d, n_head, vocab_size, seq_len, 1000 + k, "diverged", None, now)
            n_div += 1
    for k in range(unfinished):
        cfg = _config(depths[0], n_head * (k + 1), n_head, vocab_size, seq_len, 2000 + k)
        storage.open_results(results).replace(f"{storage.RUNS}/{cfg.run_id()}/{storage.CONFIG}", cfg.to_dict())
    return {"a": surface.a, "b": surface.b, "surface": asdict(surface), "depths": depths,
            "n_records": n_written, "n_diverged": n_div, "n_unfinished": unfinished,
            "true_transitions": truths}


def _config(L: int, d: int, n_head: int, vocab_size: int, seq_len: int, seed: int) -> RunConfig:
    return RunConfig(model=ModelConfig(n_layer=L, d_model=d, n_head=n_head, vocab_size=vocab_size, seq_len=seq_len),
                     data=DataConfig(corpus="synthetic"), train=TrainConfig(seed=seed))


def _write_record(results, L, d, n_head, vocab_size, seq_len, seed, status, test_loss, now) -> None:
    cfg = _config(L, d, n_head, vocab_size, seq_len, seed)
    t = cfg.train
    write_record(results, Record(
        run_id=cfg.run_id(), status=status, config=cfg.to_dict(),
        n_layer=L, d_model=d, n_head=n_head, vocab_size=vocab_size, seq_len=seq_len, seed=seed,
        params=params_of(L, d, n_head=n_head, vocab_size=vocab_size, seq_len=seq_len),
        tokens=t.steps * t.batch_size * seq_len, steps=t.steps,
        train_loss=test_loss, val_loss=test_loss, test_loss=test_loss, wall_s=0.0, compile_s=0.0,
        versions={"synthetic": "depthwidth.fits.synthetic"}, device="synthetic", finished_at=now))
