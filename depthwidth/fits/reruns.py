"""Rerun noise: the same configuration and seed trained twice, and what that spread does to N*.

A run's test loss depends on its config only up to the floating-point path of the machine that
trained it (XLA:CPU kernels differ between CPUs and library builds; one thread per run, so not
between core counts). When a results table is pooled from directories that trained some runs
twice (``load_table(..., reruns="first")``), each such pair measures that spread directly:

    Δ_i = loss_other − loss_kept,   σ_rerun = SD(Δ)/√2   (the noise of one training, nats/token)

:func:`rerun_spread` summarises the pairs (by the CPU models the records carry). What σ_rerun does
to each transition (:func:`rerun_effect`): every run's loss gets an independent N(0, σ_rerun²)
draw, the cell means are recomputed, and the pair's N* (same curve and crossing rule as the fit)
is found again, ``draws`` times; the SD of ln N* over the draws that cross (and the share that
cross) is what a rerun of every run on another machine would move it by. Independent per-run
noise is already part of the seeds' spread that the paired bootstrap resamples (each seed's run
was trained once, on one machine), so the bootstrap carries it when the runs of a cell came from
different machines; this measures its size beside the bootstrap's σ.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from depthwidth.fits.transitions import find_crossing, select_pairs


def rerun_spread(reruns: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Statistics of the rerun pairs (``ResultsTable.reruns``): n, mean/SD/max |Δ| of the loss
    differences (nats/token), σ_rerun = SD/√2 and the CPU models per side. None without pairs."""
    d = np.array([r["test_loss_other"] - r["test_loss_kept"] for r in reruns
                  if r.get("test_loss_other") is not None and r.get("test_loss_kept") is not None])
    if d.size < 2:
        return None
    sd = float(d.std(ddof=1))
    return {"n": int(d.size), "mean_diff": float(d.mean()), "sd_diff": sd, "max_abs_diff": float(np.abs(d).max()),
            "sigma_rerun": sd / math.sqrt(2.0),
            "cpu_pairs": sorted({f"{r.get('cpu_kept')} / {r.get('cpu_other')}" for r in reruns}),
            "identical": int(np.sum(d == 0))}


def rerun_effect(table, sigma: float, *, pairs: str = "doubling", draws: int = 500, seed: int = 0,
                 curve: str = "pchip", crossing: str = "last") -> list[dict[str, Any]]:
    """Per depth pair of ``table``: the SD of ln N* when every run's loss moves by an independent
    N(0, sigma²) (module docstring), over ``draws`` draws, with the share of draws that cross."""
    rng = np.random.default_rng(seed)
    out = []
    for Ls, Ld in select_pairs(table.depths(), pairs):
        curves = []
        for L in (Ls, Ld):
            c = table.cells[table.cells["n_layer"] == L].sort_values("ln_N")
            curves.append((c["ln_N"].to_numpy(float), [np.asarray(table.losses[(L, int(d))]) for d in c["d_model"]]))
        xs = []
        for _ in range(draws):
            ys = [np.array([(v + rng.normal(0.0, sigma, v.size)).mean() for v in losses]) for _, losses in curves]
            cr = find_crossing(curves[0][0], ys[0], curves[1][0], ys[1], curve, crossing)
            xs.append(cr.x_star if cr.x_star is not None else math.nan)
        x = np.array(xs)
        ok = np.isfinite(x)
        out.append({"pair": [Ls, Ld], "draws": draws, "share_crossing": float(ok.mean()),
                    "sd_ln_n_star": float(x[ok].std(ddof=1)) if ok.sum() > 1 else None})
    return out
