"""The equal-weight triple (``depthwidth exp triple``): does the loss care about shape at fixed N?

Reads kind "train" records through :func:`depthwidth.fits.table.load_table` and compares
*shapes* (n_layer L, d_model d) that hold the same Kaplan N = 12·L·d² (Kaplan et al. 2020,
eq. 2.1's non-embedding count), plus a *half-budget control*: the middle depth at about N/2.

The claim tested (issue 11 item 2, docs/concepts.md; the texts the project grew from, on 2×768²,
8×384², 32×192² trained on char-level Shakespeare): the middle shape wins, both ends (aspect
ratio d/L = 384 and 6) trail it, and the spread of the triple is small next to halving the
budget. Kaplan et al. 2020 §3.1 (Fig. 5) is the published form: at fixed N the loss changes by
a few percent across d/L ≈ 10–1000, parameter count first-order, shape second-order.

Pairing: a seed fixes the initialisation *and* the batch order of every shape (the batch at
step k is a pure function of (seed, k), docs/guide/data.md), so shapes are compared seed by seed:
the paired difference of shapes A and B is Δ_s = loss_A,s − loss_B,s, averaged over the seeds
both have (each pair on its own common seeds, so a shape missing a seed costs only its pairs); its standard error is std(Δ, ddof=1)/√n and its 95% interval the Student-t one,
mean ± t_{0.975, n−1}·sem (scipy.stats.t). Statistics that combine all shapes (the spread
max − min of the triple's means, the half-budget gap control − middle, their ratio) use only
the seeds every compared shape has, and get a paired bootstrap: each replicate draws seeds
with replacement and, when every record keeps its per-chunk test losses
(``test_loss_chunks``, the same 32 consecutive chunks of the same test text for every shape),
test chunks with replacement, the *same* draw for every shape (so the evaluation set is
resampled as well as the seeds; with 3 seeds the seed draw alone has only 10 distinct
outcomes). Losses are nats per token (per character here). numpy and scipy only.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any

import numpy as np

from depthwidth.errors import UserError

Shape = tuple[int, int]  # (n_layer, d_model)
N_REL_TOL = 1e-9  # shapes of one triple hold exactly the same 12·L·d² (integers)


def find_shapes(table) -> tuple[list[Shape], Shape | None]:
    """(triple, control) found in a :class:`~depthwidth.fits.table.ResultsTable`'s cells.

    triple: the cells sharing one Kaplan N, the largest such group (ties: the larger N), sorted
    by depth; at least 2 shapes. control: among the cells of the triple's middle depth (the
    median depth, index len//2) with a smaller N, the one whose N is nearest half the triple's
    (|ln(N_c/N) − ln ½| least), or None when there is none.
    Raises UserError when no two cells share an N.
    """
    cells = table.cells
    groups: dict[float, list[Shape]] = {}
    for L, d, N in zip(cells["n_layer"], cells["d_model"], cells["N"]):
        groups.setdefault(float(N), []).append((int(L), int(d)))
    cands = sorted(((len(v), N) for N, v in groups.items() if len(v) >= 2), reverse=True)
    if not cands:
        raise UserError(f"{table.results}: no two shapes share a Kaplan N = 12*L*d^2; "
                        "a triple needs equal-budget shapes")
    N = cands[0][1]
    triple = sorted(groups[N])
    mid_L = triple[len(triple) // 2][0]
    lower = [(abs(math.log(Nc / N) - math.log(0.5)), s) for Nc, v in groups.items() if Nc < N
             for s in v if s[0] == mid_L]
    return triple, (min(lower)[1] if lower else None)


def _losses(table, shape: Shape) -> dict[int, float]:
    """seed -> test loss of the used runs of ``shape``."""
    runs = table.runs
    ok = runs["reason"].isna() & (runs["n_layer"] == shape[0]) & (runs["d_model"] == shape[1])
    return {int(s): float(v) for s, v in zip(runs.loc[ok, "seed"], runs.loc[ok, "test_loss"])}


def _chunks(table, shape: Shape) -> dict[int, list[float]] | None:
    runs = table.runs
    ok = runs["reason"].isna() & (runs["n_layer"] == shape[0]) & (runs["d_model"] == shape[1])
    out = {int(s): c for s, c in zip(runs.loc[ok, "seed"], runs.loc[ok, "chunks"])}
    if not all(isinstance(c, list) and c for c in out.values()):
        return None
    return {s: [float(x) for x in c] for s, c in out.items()}


def paired_difference(a: dict[int, float], b: dict[int, float]) -> dict[str, Any]:
    """Seed-paired difference of two shapes' losses, a − b (module docstring).

    a, b: seed -> loss. Returns {n, seeds, mean, sem, ci95: [lo, hi], diffs}; sem and ci95 are
    None for one common seed. Raises UserError when the two share no seed.
    """
    # scipy: ~0.8 s at import; only fitting pays it
    from scipy import stats

    seeds = sorted(set(a) & set(b))
    if not seeds:
        raise UserError("two shapes share no seed: a paired difference needs runs of the same seed")
    diffs = np.array([a[s] - b[s] for s in seeds])
    n, mean = len(diffs), float(diffs.mean())
    if n < 2:
        return {"n": n, "seeds": seeds, "mean": mean, "sem": None, "ci95": None, "diffs": diffs.tolist()}
    sem = float(diffs.std(ddof=1) / math.sqrt(n))
    half = float(stats.t.ppf(0.975, n - 1)) * sem
    return {"n": n, "seeds": seeds, "mean": mean, "sem": sem, "ci95": [mean - half, mean + half],
            "diffs": diffs.tolist()}


def _shape_row(table, shape: Shape, losses: dict[int, float]) -> dict[str, Any]:
    L, d = shape
    cell = table.cells[(table.cells["n_layer"] == L) & (table.cells["d_model"] == d)].iloc[0]
    y = np.array([losses[s] for s in sorted(losses)])
    std = float(y.std(ddof=1)) if len(y) > 1 else None
    return {"n_layer": L, "d_model": d, "aspect": d / L, "N": float(cell["N"]),
            "N_exact": None if cell["N_exact"] is None else float(cell["N_exact"]),
            "seeds": sorted(losses), "losses": [losses[s] for s in sorted(losses)],
            "mean": float(y.mean()), "std": std, "sem": None if std is None else std / math.sqrt(len(y))}


def bootstrap(losses: np.ndarray, chunks: np.ndarray | None, n_boot: int, seed: int = 0) -> np.ndarray:
    """Paired bootstrap replicates of every shape's mean loss (module docstring).

    losses: (S shapes, n seeds) test losses; chunks: (S, n, K) per-chunk test losses or None.
    Each replicate draws n seeds and (with chunks) K chunks with replacement, the same draw for
    every shape. Returns (S, n_boot) replicate means (nats/token).
    Raises UserError for n_boot < 1.
    """
    if n_boot < 1:
        raise UserError(f"--bootstrap must be >= 1, got {n_boot}")
    rng = np.random.default_rng(seed)
    S, n = losses.shape
    sidx = rng.integers(0, n, size=(n_boot, n))
    if chunks is None:
        per = np.repeat(losses[:, None, :], n_boot, axis=1)  # (S, B, n)
    else:
        cidx = rng.integers(0, chunks.shape[2], size=(n_boot, chunks.shape[2]))
        per = chunks[:, :, cidx].mean(axis=-1).transpose(0, 2, 1)  # (S, n, B, K) -> (S, B, n)
    return per[:, np.arange(n_boot)[:, None], sidx].mean(axis=-1)


def _ci(x: np.ndarray) -> list[float] | None:
    x = x[np.isfinite(x)]
    return [float(np.percentile(x, 2.5)), float(np.percentile(x, 97.5))] if x.size else None


def _common(table, shapes: list[Shape]) -> tuple[list[int], dict[Shape, dict[int, float]]]:
    losses = {s: _losses(table, s) for s in shapes}
    for s, v in losses.items():
        if not v:
            raise UserError(f"{table.results}: shape L={s[0]} d={s[1]} has no usable run")
    seeds = sorted(set.intersection(*(set(v) for v in losses.values())))
    if not seeds:
        raise UserError(f"{table.results}: the shapes {shapes} share no seed; a paired comparison needs one")
    return seeds, losses


def _replicates(table, shapes: list[Shape], seeds: list[int], losses, n_boot: int, seed: int):
    """(S, B) bootstrap means on the common seeds, and the resampling used."""
    y = np.array([[losses[s][k] for k in seeds] for s in shapes])
    ch = [_chunks(table, s) for s in shapes]
    ok = all(c is not None for c in ch) and len({len(c[k]) for c in ch for k in seeds}) == 1
    c = np.array([[c_[k] for k in seeds] for c_ in ch]) if ok else None
    return bootstrap(y, c, n_boot, seed), ("seeds and test chunks" if ok else "seeds")


def analyse(table, triple: list[Shape] | None = None, control: Shape | None = None,
            n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """The triple's statistics and verdicts (module docstring) as a JSON-ready dict.

    table: a loaded ResultsTable. triple / control: the shapes, default :func:`find_shapes`.
    Returns {N, shapes, control, middle, seeds, pairs, winner, spread, spread_pct, half_gap,
    ratio, bootstrap, verdict}: losses in nats/token, spread_pct in % of the winner's loss,
    ratio = spread / half_gap (dimensionless). Raises UserError (no equal-N shapes, a shape
    without usable runs, no seed common to all).
    """
    if not triple:
        triple, found = find_shapes(table)
        control = control if control is not None else found
    triple = sorted(triple)
    shapes = triple + ([control] if control else [])
    seeds, losses = _common(table, shapes)
    common = {s: {k: losses[s][k] for k in seeds} for s in shapes}
    middle = triple[len(triple) // 2]
    means = {s: float(np.mean(list(common[s].values()))) for s in shapes}
    tm = [means[s] for s in triple]
    winner = triple[int(np.argmin(tm))]
    ends = [e for e in triple if e != middle]
    which = [(e, middle) for e in ends] + list(combinations(ends, 2)) + ([(control, middle)] if control else [])
    pairs = [{"a": list(a), "b": list(b), **paired_difference(losses[a], losses[b])} for a, b in which]
    spread = max(tm) - min(tm)
    rep, how = _replicates(table, shapes, seeds, common, n_boot, seed)
    rt = rep[: len(triple)]
    b_spread = rt.max(axis=0) - rt.min(axis=0)
    win = np.bincount(rt.argmin(axis=0), minlength=len(triple)) / rep.shape[1]
    out: dict[str, Any] = {
        "N": float(table.cells.loc[(table.cells["n_layer"] == middle[0]) & (table.cells["d_model"] == middle[1]), "N"].iloc[0]),
        "shapes": [_shape_row(table, s, losses[s]) for s in triple],
        "control": _shape_row(table, control, losses[control]) if control else None,
        "middle": list(middle), "seeds": seeds, "pairs": pairs, "winner": list(winner),
        "means_common": [means[s] for s in triple], "spread": spread, "spread_pct": 100 * spread / min(tm),
        "half_gap": None, "ratio": None,
        "bootstrap": {"n": int(rep.shape[1]), "resample": how, "seed": seed, "spread_ci95": _ci(b_spread),
                      "win_share": {f"{s[0]}x{s[1]}": float(w) for s, w in zip(triple, win)}},
    }
    if control:
        out.update(_half_budget(out, common, middle, control, rep[-1] - rep[len(triple) // 2], b_spread, spread))
    out["verdict"] = verdict(out)
    return out


def _half_budget(out, common, middle: Shape, control: Shape, b_gap: np.ndarray, b_spread: np.ndarray,
                 spread: float) -> dict[str, Any]:
    """The half-budget gap (control − middle, paired) and the ratio spread / gap, with their
    bootstrap intervals and P(spread < gap) over the replicates."""
    gap = paired_difference(common[control], common[middle])
    c, m = out["control"], next(r for r in out["shapes"] if (r["n_layer"], r["d_model"]) == middle)
    with np.errstate(divide="ignore", invalid="ignore"):
        b_ratio = np.where(b_gap > 0, b_spread / b_gap, np.nan)
    out["bootstrap"].update({"gap_ci95": _ci(b_gap), "ratio_ci95": _ci(b_ratio),
                             "p_spread_below_gap": float(np.mean(b_spread < b_gap)),
                             "gap_nonpositive": int(np.sum(b_gap <= 0))})
    return {"half_gap": gap, "ratio": spread / gap["mean"] if gap["mean"] > 0 else None,
            "control_N_ratio": c["N"] / m["N"],
            "control_N_exact_ratio": (c["N_exact"] / m["N_exact"]) if c["N_exact"] and m["N_exact"] else None}


def _word(holds: bool, resolved: bool) -> str:
    if resolved:
        return "held" if holds else "did not hold"
    return "unresolved (" + ("leans held" if holds else "leans against") + ")"


def verdict(out: dict[str, Any]) -> dict[str, Any]:
    """The three parts of the prediction, each 'held', 'did not hold' or 'unresolved (...)'.

    middle_wins: the middle shape has the lowest mean; resolved when the bootstrap gives the
    point winner >= 95% of the replicates. ends_trail: every end minus the middle has a positive
    mean paired difference; resolved when every such difference's 95% t interval excludes 0.
    spread_small: spread < half-budget gap; resolved when P(spread < gap) >= 0.95 or <= 0.05
    (bootstrap). The bootstrap parts need >= 2 seeds common to all shapes to be resolved (with one,
    it resamples only the test chunks: evaluation noise, not seed-to-seed noise). overall: 'held' / 'did not hold' when all three parts say so, else 'mixed'.
    """
    mid = out["middle"]
    share = out["bootstrap"]["win_share"]
    w = out["winner"]
    seeds_ok = len(out["seeds"]) >= 2  # one seed: the bootstrap sees evaluation noise, not seed noise
    parts = {"middle_wins": _word(w == mid, seeds_ok and share[f"{w[0]}x{w[1]}"] >= 0.95)}
    shapes = [[r["n_layer"], r["d_model"]] for r in out["shapes"]]
    ends = [p for p in out["pairs"] if p["b"] == mid and p["a"] in shapes]  # not the control's pair
    pos = all(p["mean"] > 0 for p in ends)
    if pos:  # held when every end trails significantly
        sig = all(p["ci95"] is not None and p["ci95"][0] > 0 for p in ends)
    else:  # did not hold when some end is significantly ahead of the middle
        sig = any(p["ci95"] is not None and p["ci95"][1] < 0 for p in ends)
    parts["ends_trail"] = _word(pos, sig)
    if out.get("half_gap") is not None:
        p = out["bootstrap"]["p_spread_below_gap"]
        parts["spread_small"] = _word(out["spread"] < out["half_gap"]["mean"], seeds_ok and (p >= 0.95 or p <= 0.05))
    words = set(parts.values())
    parts["overall"] = words.pop() if len(words) == 1 and words <= {"held", "did not hold"} else "mixed"
    return parts
