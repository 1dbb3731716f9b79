"""Adaptive refinement of a sweep: add widths where a transition lies, until it is pinned down.

Levine et al. (2020, v3) located transitions on a coarse grid of depth pairs and then trained
extra widths for adjacent pairs to narrow them down. This module does the same automatically,
after a preset's coarse grid is finished (``depthwidth sweep --refine``). Each *round*:

1. loads the results table (only the records: :func:`depthwidth.fits.table.load_table`) and
   computes the transition of every selected depth pair with the seed-paired bootstrap
   (:func:`depthwidth.fits.transitions.compute_transitions`);
2. proposes a new size N for each pair that is not yet *resolved*, at **both** depths at equal
   N = 12·L·d² (widths rounded to a multiple of ``n_head``):

   * a crossing whose 95% interval is wider than ``target_ln_width`` (in ln N) or open, or a
     crossing found in fewer than 95% of replicates: the geometric midpoint of the two measured
     sizes that bracket N* (the union of both depths' sizes);
   * ``deeper_worse_throughout`` (N* above the range) when ``extend``: twice the largest common
     size, if it is at most ``max_N``; ``deeper_better_throughout``: half the smallest, if at
     least ``min_N``;

   a proposal whose widths both exist already is dropped (the bracket is at width resolution);
3. trains the proposed cells with all the preset's seeds, as ordinary run records.

It stops when no pair needs a new size, or when the refined runs (records of this preset's base
outside its grid) would exceed ``max_runs``. Everything is a pure function of the records, so
an interrupted refinement resumes where it stopped, and every worker proposes the same runs.

Preset table (all keys optional)::

    [refine]
    pairs = "adjacent"          # depth pairs to refine ("adjacent" or "doubling")
    target_ln_width = 0.35      # 95% interval of ln N* to reach (0.35: N* within ~x1.4)
    max_runs = 36               # refined runs at most (cells x seeds)
    extend = true               # also extend the range when a pair does not cross inside it
    max_N = 1.6e6               # ... but never above this Kaplan N (parameters)
    min_N = 1e4                 # ... or below this
    bootstrap = 400             # replicates per round
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from depthwidth.config import RunConfig, from_dict
from depthwidth.errors import UserError

REFINE_KEYS = {"pairs", "target_ln_width", "max_runs", "extend", "max_N", "min_N", "bootstrap"}


@dataclass(frozen=True)
class RefineSpec:
    """Refinement options (module docstring); units: ln N for target_ln_width, parameters for N."""

    pairs: str = "adjacent"
    target_ln_width: float = 0.35
    max_runs: int = 36
    extend: bool = True
    max_N: float = 1.6e6
    min_N: float = 1e4
    bootstrap: int = 400

    def __post_init__(self) -> None:
        if self.pairs not in ("adjacent", "doubling"):
            raise UserError(f"refine.pairs must be 'adjacent' or 'doubling', got {self.pairs!r}")
        if not (self.target_ln_width > 0 and self.max_runs >= 0 and self.bootstrap >= 50
                and 0 < self.min_N < self.max_N):
            raise UserError("refine needs target_ln_width > 0, max_runs >= 0, bootstrap >= 50, 0 < min_N < max_N")


def parse_refine(raw: Any, where: str) -> RefineSpec | None:
    """The preset's ``[refine]`` table as a RefineSpec (None when absent); UserError if malformed."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UserError(f"{where}: refine must be a table")
    unknown = sorted(set(raw) - REFINE_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown refine key(s) {', '.join(unknown)} (known: {', '.join(sorted(REFINE_KEYS))})")
    types = {f.name: f.type for f in dataclasses.fields(RefineSpec)}
    vals = {}
    for k, v in raw.items():
        want = {"str": str, "float": (int, float), "int": int, "bool": bool}[types[k]]
        if isinstance(v, bool) != (types[k] == "bool") or not isinstance(v, want):
            raise UserError(f"{where}: refine.{k} must be a {types[k]}, got {v!r}")
        vals[k] = float(v) if types[k] == "float" else v
    return RefineSpec(**vals)


def _even_width(N: float, L: int, n_head: int) -> int:
    """The width nearest sqrt(N / (12 L)) that n_head divides (at least n_head)."""
    return max(n_head, n_head * int(round(math.sqrt(N / (12.0 * L)) / n_head)))


def _proposal(p, cells_by_depth: dict[int, list[tuple[float, int]]], spec: RefineSpec) -> float | None:
    """The new size N for one transition point, or None when it is resolved or cannot move."""
    from depthwidth.fits.transitions import MIN_FRACTION, USABLE

    sizes = sorted({N for L in (p.L_s, p.L_d) for N, _ in cells_by_depth[L]})
    if p.status in USABLE:
        ci = p.N_star_ci95
        resolved = (ci and ci[0] and ci[1] and math.log(ci[1] / ci[0]) <= spec.target_ln_width
                    and p.bootstrap_fraction >= MIN_FRACTION)
        if resolved:
            return None
        below = [N for N in sizes if N <= p.N_star]
        above = [N for N in sizes if N > p.N_star]
        if not below or not above:
            return None
        return math.sqrt(below[-1] * above[0])
    if not spec.extend or not p.N_range:
        return None
    if p.status == "deeper_worse_throughout":
        N = 2.0 * p.N_range[1]
        return N if N <= spec.max_N else None
    if p.status == "deeper_better_throughout":
        N = 0.5 * p.N_range[0]
        return N if N >= spec.min_N else None
    return None


def proposals(table, spec: RefineSpec, n_head: int) -> list[dict[str, Any]]:
    """New cells for one round: [{"L_s", "L_d", "status", "N", "cells": [(L, d), ...]}] for the
    pairs that are not resolved (module docstring). ``table`` is a fits ResultsTable."""
    from depthwidth.fits.transitions import compute_transitions

    points, _ = compute_transitions(table, pairs=spec.pairs, bootstrap=spec.bootstrap)
    have = {(int(L), int(d)) for L, d in zip(table.cells["n_layer"], table.cells["d_model"])}
    by_depth: dict[int, list[tuple[float, int]]] = {}
    for L, d, N in zip(table.cells["n_layer"], table.cells["d_model"], table.cells["N"]):
        by_depth.setdefault(int(L), []).append((float(N), int(d)))
    out, taken = [], set()
    for p in points:
        N = _proposal(p, by_depth, spec)
        if N is None:
            continue
        new = [(L, _even_width(N, L, n_head)) for L in (p.L_s, p.L_d)]
        new = [c for c in new if c not in have and c not in taken]
        if new:
            taken.update(new)
            out.append({"L_s": p.L_s, "L_d": p.L_d, "status": p.status, "N": N, "cells": new})
    return out


def cell_configs(preset, cells: list[tuple[int, int]]) -> list[RunConfig]:
    """RunConfigs for (depth, width) cells with every seed and corpus of ``preset``: its base with
    the depth's overrides, exactly as the preset's own grid points are built."""
    from depthwidth.experiments.presets import merge_config

    runs = []
    for corpus in preset.corpora:
        for seed in preset.seeds:
            for L, d in cells:
                cfg = merge_config(preset, L, d, seed, corpus)
                runs.append(from_dict(cfg))
    return runs


def refined_runs_done(preset, table) -> int:
    """Records in the table that belong to no grid point of ``preset`` (refined runs so far)."""
    grid = {r.run_id() for r in preset.runs}
    return int(sum(1 for rid in table.runs["run_id"] if rid not in grid))


def plan_round(preset, results: str, spec: RefineSpec) -> tuple[list[dict[str, Any]], list[RunConfig]]:
    """(proposals, their runs trimmed to the remaining budget) for the next round."""
    from depthwidth.fits.table import load_table

    table = load_table(results)
    props = proposals(table, spec, preset.base.model.n_head)
    left = spec.max_runs - refined_runs_done(preset, table)
    runs: list[RunConfig] = []
    for pr in props:
        more = cell_configs(preset, pr["cells"])
        if len(runs) + len(more) > left:
            break
        runs += more
    return props, runs


def round_preset(preset, results: str):
    """The preset restricted to the next round's runs, and the round's proposals (both workers
    of a round compute the same from the same records)."""
    if len(preset.corpora) != 1:
        raise UserError(f"preset {preset.name}: --refine works on a one-corpus preset (a fit holds one corpus)")
    props, runs = plan_round(preset, results, preset.refine or RefineSpec())
    return dataclasses.replace(preset, runs=tuple(runs)), props


def describe(props: list[dict[str, Any]]) -> list[str]:
    """One line per proposal, for the sweep's progress log."""
    from depthwidth.units import format_count

    return [f"pair ({p['L_s']},{p['L_d']}) {p['status']}: add N ~ {format_count(p['N'])} as "
            + ", ".join(f"L{L} d{d}" for L, d in p["cells"]) for p in props]
