"""Kaplan's shape band: at a fixed budget of N, how much does the test loss depend on the shape d/L?

Kaplan et al. 2020 (§3.1, Fig. 5) hold the non-embedding parameter count N fixed and vary the
shape: the loss "varies only a few percent over a wide range of shapes", the aspect ratio
d_model/n_layer ranging over about 10 to 1000 at a few percent. This module measures the same
quantity on stored kind-"train" records (the ``band`` preset's deep shapes together with the
``law`` grid), for each budget B:

Shapes at a budget
    Per depth L, the (L, d) cell whose Kaplan N = 12·L·d² (Kaplan et al. 2020, Table 1) is
    nearest to B in ln N, if within a factor ``tolerance`` of B; at least two depths must qualify
    (else :class:`~depthwidth.errors.UserError`).

Correction to exactly B
    The shapes' N differ a little (23.2K to 27.6K at B = 25K). As Kaplan et al. do in Fig. 5
    ("small differences in parameter counts are compensated for by using the fit to L(N) as a
    baseline"), each depth gets its own power law, fitted by least squares in log-log space to its
    cells within a factor ``window`` of B (all its cells if fewer than two are that close):

        ln y_L(N) = a_L + α_L · ln N          (Kaplan et al. 2020, eq. 1.1 form, L(N) ∝ N^α)

    and a shape measured at (N_s, ȳ_s) is moved along its own depth's slope to the budget:

        ŷ_s(B) = ȳ_s · (B / N_s)^α_L.

    A depth with a single cell takes the mean slope of the other depths at that budget
    (``slope_from = "other depths"``). ȳ_s is the mean test loss over the cell's seeds (nats/token).

Spread and parameter multiplier
    spread_pct = 100 · (max_s ŷ_s − min_s ŷ_s) / min_s ŷ_s. The multiplier m is how much larger
    the worst shape must be to reach the best shape's loss along its own depth's power law:
    ŷ_worst · m^α_worst = ŷ_best, so m = (ŷ_best / ŷ_worst)^(1/α_worst) (≥ 1 for α < 0).

Uncertainty
    The seed-paired bootstrap of :func:`depthwidth.fits.transitions.paired_bootstrap_means` (a
    seed fixes initialisation and batch order of every shape, so one replicate draws the seeds
    once for all cells, plus the 32 test-set chunks when recorded); each replicate refits the
    slopes and recomputes every number. Intervals: 2.5 and 97.5 percentiles. The spread of a
    replicate is its own max − min, so near zero it is biased upwards (a max of noisy values).
    A cell with fewer seeds than the others (a partial sweep) moves only by the test-chunk term
    when none of its seeds is drawn, so its seed noise is not in the interval;
    :func:`common_seeds` gives the numbers on the seeds all shapes share.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from depthwidth.errors import UserError
from depthwidth.fits import options
from depthwidth.fits.table import ResultsTable, load_table
from depthwidth.fits.transitions import _DepthData, paired_bootstrap_means
from depthwidth.records import iter_records
from depthwidth.units import format_count, parse_count_list

DEFAULT_BUDGETS = options.BAND_BUDGETS
DEFAULT_TOLERANCE = options.BAND_TOLERANCE
DEFAULT_WINDOW = options.BAND_WINDOW
DEFAULT_BOOTSTRAP = options.BAND_BOOTSTRAP
KAPLAN_CLAIM = "a few percent across d/L 10-1000 (Kaplan et al. 2020, section 3.1, Fig. 5)"
# What may differ between the runs compared: the shape and the width-aware lr it implies.
SHAPE_KEYS = (("model", "n_layer"), ("model", "d_model"), ("train", "lr"))


def parse_budgets(text: str) -> list[float]:
    """Budgets (Kaplan N) from ``"6K,25K,100K"``; UserError for a malformed, non-positive or
    repeated entry."""
    if not isinstance(text, str) or not text.strip():
        raise UserError("--budgets must be a comma-separated list of parameter counts, e.g. 25K,100K")
    budgets = parse_count_list(text, name="--budgets")
    if len(set(budgets)) != len(budgets):
        raise UserError(f"--budgets has a repeated budget: {text!r}")
    return sorted(budgets)


def _protocol(context: str) -> str:
    """A run's identity JSON (table ``context``) without the shape keys: what must agree."""
    ident = json.loads(context)
    if not isinstance(ident, dict):
        return context
    for sec, key in SHAPE_KEYS:
        ident.get(sec, {}).pop(key, None)
    return json.dumps(ident, sort_keys=True)


def merged_table(results_dirs: list[str]) -> ResultsTable:
    """One :class:`ResultsTable` of the kind-"train" records of several results directories.

    A directory holding no record at all is skipped. Raises UserError (one line) if a directory
    is missing or none holds a record, if one has records but no usable run, if a (L, d) cell
    is in two directories (it would be averaged across protocols), or if the used runs were
    trained under different protocols beyond (n_layer, d_model, lr): a band compares shapes only.
    """
    # A directory that exists but holds no record yet (a band sweep not started) adds nothing.
    results_dirs = [d for d in results_dirs if iter_records(d)]
    if not results_dirs:
        raise UserError("no records in the results directories to read")
    tables = [load_table(d) for d in results_dirs]
    seen: dict[tuple[int, int], str] = {}
    for d, t in zip(results_dirs, tables):
        for key in t.losses:
            if key in seen:
                raise UserError(f"cell L={key[0]} d={key[1]} is in both {seen[key]} and {d}; read one of them")
            seen[key] = d
    runs = pd.concat([t.runs for t in tables], ignore_index=True)
    used = runs[runs["reason"].isna()]
    protocols = {_protocol(c) for c in used["context"]}
    if len(protocols) > 1:
        raise UserError(f"the runs of {', '.join(results_dirs)} differ beyond (n_layer, d_model, lr) in "
                        f"{len(protocols)} ways: a shape band needs one training protocol")
    cells = pd.concat([t.cells for t in tables], ignore_index=True).sort_values(["n_layer", "d_model"])
    return ResultsTable(results=",".join(map(str, results_dirs)), runs=runs, cells=cells.reset_index(drop=True),
                        excluded=pd.concat([t.excluded for t in tables], ignore_index=True),
                        unfinished=[u for t in tables for u in t.unfinished],
                        losses={k: v for t in tables for k, v in t.losses.items()},
                        chunks={k: v for t in tables for k, v in (t.chunks or {}).items()},
                        other_kinds={k: v for t in tables for k, v in t.other_kinds.items()})


def select_shapes(cells: pd.DataFrame, budget: float, tolerance: float = DEFAULT_TOLERANCE) -> list[tuple[int, int]]:
    """Per depth, the (n_layer, d_model) cell nearest ``budget`` in ln N within a factor
    ``tolerance``; sorted by depth. UserError if fewer than two depths have one."""
    if not tolerance > 1:
        raise UserError(f"--tolerance must be a factor > 1, got {tolerance}")
    out = []
    for L, g in cells.groupby("n_layer", sort=True):
        gap = (np.log(g["N"].to_numpy(dtype=float)) - math.log(budget))
        i = int(np.argmin(np.abs(gap)))
        if abs(gap[i]) <= math.log(tolerance):
            out.append((int(L), int(g["d_model"].iloc[i])))
    if len(out) < 2:
        raise UserError(f"budget {format_count(budget)}: only {len(out)} depth(s) have a shape within x{tolerance:g} "
                        f"of it (need 2); the cells' N run from {format_count(cells['N'].min())} "
                        f"to {format_count(cells['N'].max())}")
    return out


def power_law_slope(N: np.ndarray, y: np.ndarray) -> float:
    """α of ln y = a + α ln N, least squares over the points (N > 0 parameters, y > 0 nats);
    NaN for fewer than two distinct N."""
    N, y = np.asarray(N, dtype=float), np.asarray(y, dtype=float)
    if len(np.unique(N)) < 2:
        return math.nan
    return float(np.polyfit(np.log(N), np.log(y), 1)[0])


def corrected_loss(y: float, N: float, budget: float, alpha: float) -> float:
    """ŷ(B) = y · (B/N)^α: a loss y measured at N moved to the budget B along L(N) ∝ N^α
    (Kaplan et al. 2020, eq. 1.1 form; the Fig. 5 baseline correction)."""
    return float(y * (budget / N) ** alpha)


def multiplier(y_best: float, y_worst: float, alpha_worst: float) -> float:
    """m = (y_best / y_worst)^(1/α): the factor in N the worst shape needs, along its own power
    law y ∝ N^α (α < 0), to reach the best shape's loss. NaN for α >= 0 (loss not falling with N)."""
    if not alpha_worst < 0:
        return math.nan
    return float((y_best / y_worst) ** (1.0 / alpha_worst))


def _slopes(cells: pd.DataFrame, means: dict[tuple[int, int], float], shapes: list[tuple[int, int]],
            budget: float, window: float) -> dict[int, tuple[float, str]]:
    """Per depth of ``shapes``: (α_L, where it came from) for the correction (module docstring)."""
    out: dict[int, tuple[float, str]] = {}
    for L, _ in shapes:
        g = cells[cells["n_layer"] == L]
        N = g["N"].to_numpy(dtype=float)
        near = np.abs(np.log(N / budget)) <= math.log(window)
        pick = near if near.sum() >= 2 else np.ones_like(near)
        y = np.array([means[(L, int(d))] for d in g["d_model"]])
        a = power_law_slope(N[pick], y[pick])
        out[L] = (a, f"{int(pick.sum())} cells" if math.isfinite(a) else "other depths")
    finite = [a for a, _ in out.values() if math.isfinite(a)]
    if not finite:
        raise UserError(f"budget {format_count(budget)}: no depth has two sizes to fit a loss-vs-N slope")
    return {L: (a if math.isfinite(a) else float(np.mean(finite)), src) for L, (a, src) in out.items()}


def budget_numbers(cells: pd.DataFrame, means: dict[tuple[int, int], float], shapes: list[tuple[int, int]],
                   budget: float, window: float = DEFAULT_WINDOW) -> dict[str, Any]:
    """Corrected losses, spread and multiplier at one budget from cell means (module docstring).

    Returns {"corrected": {(L, d): ŷ}, "alpha": {L: α}, "slope_from": {L: str}, "best", "worst":
    (L, d), "spread_pct", "multiplier"}."""
    slopes = _slopes(cells, means, shapes, budget, window)
    N = {(int(r.n_layer), int(r.d_model)): float(r.N) for r in cells.itertuples()}
    yc = {s: corrected_loss(means[s], N[s], budget, slopes[s[0]][0]) for s in shapes}
    best, worst = min(yc, key=yc.get), max(yc, key=yc.get)
    return {"corrected": yc, "alpha": {L: a for L, (a, _) in slopes.items()},
            "slope_from": {L: src for L, (_, src) in slopes.items()}, "best": best, "worst": worst,
            "spread_pct": 100.0 * (yc[worst] - yc[best]) / yc[best],
            "multiplier": multiplier(yc[best], yc[worst], slopes[worst[0]][0])}


def _replicate_means(table: ResultsTable, n_boot: int, seed: int) -> list[dict[tuple[int, int], float]]:
    """n_boot dicts (L, d) -> seed-paired bootstrap cell mean (module docstring)."""
    data = {L: _DepthData(table, L) for L in table.depths()}
    boot = paired_bootstrap_means(data, n_boot, np.random.default_rng(seed))
    keys = {L: [int(d) for d in table.cells[table.cells["n_layer"] == L].sort_values("ln_N")["d_model"]]
            for L in data}
    return [{(L, d): float(boot[L][r, j]) for L in data for j, d in enumerate(keys[L])} for r in range(n_boot)]


def _ci(values: list[float]) -> list[float] | None:
    v = np.asarray([x for x in values if math.isfinite(x)], dtype=float)
    return [float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))] if v.size else None


def common_seeds(table: ResultsTable, shapes: list[tuple[int, int]], budget: float,
                 window: float = DEFAULT_WINDOW) -> dict[str, Any] | None:
    """The budget's numbers on the seeds every one of its shapes has, when some shape lacks a
    seed the others have (a partial sweep): each cell's mean over those seeds (all its seeds
    if it has none of them), so the shapes compare on the same initialisations and batch orders.
    None when every shape has the same seeds; {"seeds": []} when they share none."""
    cells = table.cells
    seeds = {s: set(cells[(cells["n_layer"] == s[0]) & (cells["d_model"] == s[1])]["seeds"].iloc[0]) for s in shapes}
    common = set.intersection(*seeds.values())
    if all(v == common for v in seeds.values()):
        return None
    if not common:
        return {"seeds": []}
    means = {}
    for r in cells.itertuples():
        key = (int(r.n_layer), int(r.d_model))
        ys = [y for sd, y in zip(r.seeds, table.losses[key]) if sd in common]
        means[key] = float(np.mean(ys)) if ys else float(r.mean)
    p = budget_numbers(cells, means, shapes, budget, window)
    yb = p["corrected"][p["best"]]
    return {"seeds": sorted(common), "spread_pct": p["spread_pct"], "multiplier": p["multiplier"],
            "best": list(p["best"]), "worst": list(p["worst"]),
            "excess_pct": {f"L{k[0]}-d{k[1]}": 100.0 * (v / yb - 1.0) for k, v in p["corrected"].items()}}


def _budget_result(table: ResultsTable, budget: float, shapes, reps, window: float) -> dict[str, Any]:
    cells = table.cells
    means = {(int(r.n_layer), int(r.d_model)): float(r.mean) for r in cells.itertuples()}
    point = budget_numbers(cells, means, shapes, budget, window)
    boot = [budget_numbers(cells, m, shapes, budget, window) for m in reps]
    yb = point["corrected"][point["best"]]
    rows = []
    for s in shapes:
        c = cells[(cells["n_layer"] == s[0]) & (cells["d_model"] == s[1])].iloc[0]
        rows.append({"n_layer": s[0], "d_model": s[1], "d_over_L": s[1] / s[0], "N": float(c["N"]),
                     "n_seeds": int(c["n_seeds"]), "seeds": list(c["seeds"]), "loss": float(c["mean"]),
                     "sem": None if not math.isfinite(c["sem"]) else float(c["sem"]),
                     "alpha": point["alpha"][s[0]], "slope_from": point["slope_from"][s[0]],
                     "loss_at_budget": point["corrected"][s],
                     "excess_pct": 100.0 * (point["corrected"][s] / yb - 1.0),
                     "excess_pct_ci": _ci([100.0 * (b["corrected"][s] / b["corrected"][b["best"]] - 1.0) for b in boot])})
    ratios = [r["d_over_L"] for r in rows]
    return {"budget": budget, "shapes": rows, "best": list(point["best"]), "worst": list(point["worst"]),
            "spread_pct": point["spread_pct"], "spread_pct_ci": _ci([b["spread_pct"] for b in boot]),
            "multiplier": point["multiplier"], "multiplier_ci": _ci([b["multiplier"] for b in boot]),
            "d_over_L_range": [min(ratios), max(ratios)], "decades": math.log10(max(ratios) / min(ratios)),
            "common_seeds": common_seeds(table, shapes, budget, window),
            "best_share": {f"L{s[0]}-d{s[1]}": float(np.mean([b["best"] == s for b in boot])) for s in shapes}
            if boot else None}


def analyse(table: ResultsTable, budgets: list[float], *, tolerance: float = DEFAULT_TOLERANCE,
            window: float = DEFAULT_WINDOW, n_boot: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> dict[str, Any]:
    """The band at each budget (module docstring) as a JSON-ready dict.

    Args: table (e.g. :func:`merged_table`); budgets: Kaplan N values; tolerance: factor within
    which a cell counts as at a budget; window: factor of the slope fit; n_boot: bootstrap
    replicates (0: no intervals); seed: the bootstrap's generator seed.
    Raises UserError for a budget with fewer than two shapes, a bad tolerance/window, n_boot < 0.
    """
    if not window > 1:
        raise UserError(f"--window must be a factor > 1, got {window}")
    if n_boot < 0:
        raise UserError(f"--bootstrap must be >= 0, got {n_boot}")
    shapes = {B: select_shapes(table.cells, B, tolerance) for B in budgets}
    reps = _replicate_means(table, n_boot, seed) if n_boot else []
    return _finite({"claim": KAPLAN_CLAIM, "results": table.results, "tolerance": tolerance, "window": window,
            "bootstrap": n_boot, "bootstrap_seed": seed, "n_runs_used": int(table.runs["reason"].isna().sum()),
            "budgets": [_budget_result(table, B, shapes[B], reps, window) for B in budgets]})


def _finite(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (the JSON file format has no NaN)."""
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
