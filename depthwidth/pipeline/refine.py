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
     sizes that bracket N* (the union of both depths' sizes); but when more than 5% of the
     replicates have no crossing because the transition falls off one end of the common range
     (``bootstrap_below`` / ``bootstrap_above``), and ``extend``, one step past that end, as for a
     pair that does not cross: a midpoint cannot give those replicates a bracket;
   * ``deeper_worse_throughout`` (N* above the range) when ``extend``: twice the largest common
     size, if it is at most ``max_N``; ``deeper_better_throughout``: half the smallest, if at
     least ``min_N``;

   a proposal whose widths both exist already is dropped (the bracket is at width resolution);
3. trains the proposed cells with all the preset's seeds, as ordinary run records.

A round that was interrupted leaves cells with fewer seeds than the preset's. Such a cell would
steer the next proposal by one seed's loss (and the paired bootstrap pairs only complete seeds),
so a round first finishes every refined cell that lacks seeds (status ``"unfinished"``), before
and regardless of the budget (those runs were budgeted when the cell was proposed).

It stops when no pair needs a new size, or when the refined runs (records of this preset's base
outside its grid) would exceed ``max_runs``. Everything is a pure function of the records (and
of the run directories begun), so an interrupted refinement resumes where it stopped. The local
worker processes of one ``sweep --jobs N --refine`` train the round their parent planned
(:func:`cells_preset`). Separate sweep commands on one directory (other hosts) plan each for
itself: one that plans after another has begun the round's runs sees "an interrupted round" and
finishes those cells' seeds first; the next round's plan brings them together again.

Preset table (all keys optional; parsed and validated with the preset, as
:class:`~depthwidth.experiments.presets.RefineSpec`, so ``load_preset`` rejects a bad one)::

    [refine]
    pairs = "adjacent"          # depth pairs to refine ("adjacent" or "doubling")
    target_ln_width = 0.35      # 95% interval of ln N* to reach (0.35: N* within ~x1.4)
    max_runs = 36               # refined runs at most (cells x seeds)
    extend = true               # also extend the range when a pair does not cross inside it
    max_N = 1.6e6               # ... but never above this Kaplan N (parameters)
    min_N = 1e4                 # ... or below this
    bootstrap = 400             # replicates per round

Why here, in the pipeline: a round fits (``fits``) and then trains (``experiments``), and those
two layers are siblings that never import each other (ARCHITECTURE.md). The ``sweep`` command's
``--refine`` / ``--refine-round CELLS`` flags are added to it by :mod:`depthwidth.pipeline.cli`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any

from depthwidth import storage
from depthwidth.config import RunConfig, from_dict
from depthwidth.data.prepare import pin_corpus
from depthwidth.errors import UserError
from depthwidth.experiments.executors import Executor
from depthwidth.experiments.presets import REFINE_KEYS, RefineSpec, merge_config, parse_refine
from depthwidth.fits.options import MIN_FRACTION
from depthwidth.fits.table import load_table
from depthwidth.fits.transitions import USABLE, compute_transitions
from depthwidth.units import format_count

__all__ = ["REFINE_KEYS", "RefineSpec", "parse_refine", "proposals", "cell_configs", "refined_runs_done",
           "unfinished_cells", "plan_round", "round_preset", "describe", "refine_after_grid"]


def _even_width(N: float, L: int, n_head: int) -> int:
    """The width nearest sqrt(N / (12 L)) that n_head divides (at least n_head)."""
    return max(n_head, n_head * int(round(math.sqrt(N / (12.0 * L)) / n_head)))


def _past_the_end(p, spec: RefineSpec, end: str) -> float | None:
    """One step past the ``end`` ("below" or "above") of the pair's common range: half its
    smallest or twice its largest size; None when ``extend`` is off or the step would leave
    [min_N, max_N]."""
    if not spec.extend or not p.N_range:
        return None
    if end == "below":
        N = 0.5 * p.N_range[0]
        return N if N >= spec.min_N else None
    N = 2.0 * p.N_range[1]
    return N if N <= spec.max_N else None


def _proposal(p, cells_by_depth: dict[int, list[tuple[float, int]]], spec: RefineSpec) -> float | None:
    """The new size N for one transition point, or None when it is resolved or cannot move."""
    sizes = sorted({N for L in (p.L_s, p.L_d) for N, _ in cells_by_depth[L]})
    if p.status in USABLE:
        ci = p.N_star_ci95
        resolved = (ci and ci[0] and ci[1] and math.log(ci[1] / ci[0]) <= spec.target_ln_width
                    and p.bootstrap_fraction >= MIN_FRACTION)
        if resolved:
            return None
        # too many replicates without a crossing because the transition falls off one end of
        # the range: a midpoint cannot bracket them, a step past that end can
        if p.bootstrap_below + p.bootstrap_above > (1 - MIN_FRACTION) * p.bootstrap_replicates > 0:
            off = _past_the_end(p, spec, "below" if p.bootstrap_below >= p.bootstrap_above else "above")
            if off is not None:
                return off
        below = [N for N in sizes if N <= p.N_star]
        above = [N for N in sizes if N > p.N_star]
        if not below or not above:
            return None
        return math.sqrt(below[-1] * above[0])
    if p.status == "deeper_worse_throughout":
        return _past_the_end(p, spec, "above")
    if p.status == "deeper_better_throughout":
        return _past_the_end(p, spec, "below")
    return None


def proposals(table, spec: RefineSpec, n_head: int) -> list[dict[str, Any]]:
    """New cells for one round: [{"L_s", "L_d", "status", "N", "cells": [(L, d), ...]}] for the
    pairs that are not resolved (module docstring). ``table`` is a fits ResultsTable."""
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
    runs = []
    for corpus in preset.corpora:
        for seed in preset.seeds:
            for L, d in cells:
                cfg = merge_config(preset, L, d, seed, corpus)
                runs.append(from_dict(cfg))
    return runs


def refined_runs_done(preset, table) -> int:
    """Records in the table that belong to no grid point of ``preset`` (refined runs so far)."""
    grid = {pin_corpus(r).run_id() for r in preset.runs}  # the ids the sweep recorded them under
    return int(sum(1 for rid in table.runs["run_id"] if rid not in grid))


def unfinished_cells(preset, table) -> list[tuple[int, int]]:
    """(L, d) cells of ``preset`` for which some seed has no record at all, sorted: cells of the
    table missing a seed, and cells whose runs were started (a run directory without a record,
    e.g. the partner cell of an interrupted round that no seed of finished yet).

    A seed whose run has a record of any status (diverged included) counts as done, so a round
    never waits for a run the runner would skip."""

    recorded = set(table.runs["run_id"])
    cells = {(int(L), int(d)) for L, d in zip(table.cells["n_layer"], table.cells["d_model"])}
    store = storage.open_results(table.results)
    for rid in table.unfinished:
        try:  # read_json: None when missing, Ellipsis when unreadable; both fail the lookup below
            m = store.read_json(f"{storage.RUNS}/{rid}/{storage.CONFIG}")["config"]["model"]
            cell = (int(m["n_layer"]), int(m["d_model"]))
        except (ValueError, KeyError, TypeError):
            continue  # not a run this module can read: the runner reports it
        if rid in {pin_corpus(r).run_id() for r in cell_configs(preset, [cell])}:  # this preset's run
            cells.add(cell)
    return [c for c in sorted(cells) if _missing_runs(preset, [c], recorded)]


def _missing_runs(preset, cells: list[tuple[int, int]], recorded: set[str]) -> list[RunConfig]:
    """The runs of ``cells`` (every seed of ``preset``) whose run id has no record."""
    return [r for r in cell_configs(preset, cells) if pin_corpus(r).run_id() not in recorded]


def plan_round(preset, results: str, spec: RefineSpec) -> tuple[list[dict[str, Any]], list[RunConfig]]:
    """(proposals, their runs trimmed to the remaining budget) for the next round; when some cells
    lack seeds (an interrupted round), the round is those cells' runs alone."""
    table = load_table(results)
    todo = unfinished_cells(preset, table)
    if todo:
        return [{"status": "unfinished", "cells": todo}], _missing_runs(preset, todo, set(table.runs["run_id"]))
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
    """The preset restricted to the next round's runs, and the round's proposals (a pure function
    of the records and the run directories begun)."""
    if len(preset.corpora) != 1:
        raise UserError(f"preset {preset.name}: --refine works on a one-corpus preset (a fit holds one corpus)")
    props, runs = plan_round(preset, results, preset.refine or RefineSpec())
    return dataclasses.replace(preset, runs=tuple(runs)), props


def round_cells(sub) -> list[tuple[int, int]]:
    """The (depth, width) cells of a round's preset (:func:`round_preset`), sorted."""
    return sorted({(r.model.n_layer, r.model.d_model) for r in sub.runs})


def format_cells(cells: list[tuple[int, int]]) -> str:
    """``[(2, 88), (3, 72)]`` -> ``"2x88,3x72"`` (the value of a round child's ``--refine-round``)."""
    return ",".join(f"{L}x{d}" for L, d in cells)


def parse_cells(text: str) -> list[tuple[int, int]]:
    """The inverse of :func:`format_cells`; UserError (one line) for anything else."""
    try:
        cells = [tuple(int(v) for v in c.split("x")) for c in text.split(",")]
    except ValueError:
        cells = []
    if not cells or any(len(c) != 2 or min(c) < 1 for c in cells):
        raise UserError(f"--refine-round takes the round's cells as LxD,LxD (e.g. 2x88,3x72), got {text!r}")
    return sorted(set(cells))


def cells_preset(preset, cells: list[tuple[int, int]]):
    """The preset restricted to every seed of ``cells``: what a round's child worker trains (the
    runner skips the runs that have records). The parent passes the cells rather than letting
    each child plan the round from the records: a child that starts after its sibling has begun a
    run sees that run's directory without a record, and would plan "finish the seeds of" that
    cell alone, leaving the round's other cells to one worker."""
    return dataclasses.replace(preset, runs=tuple(cell_configs(preset, cells)))


def describe(props: list[dict[str, Any]]) -> list[str]:
    """One line per proposal, for the sweep's progress log."""
    def cells(p):
        return ", ".join(f"L{L} d{d}" for L, d in p["cells"])

    return [f"finish the seeds of {cells(p)} (an interrupted round)" if p["status"] == "unfinished" else
            f"pair ({p['L_s']},{p['L_d']}) {p['status']}: add N ~ {format_count(p['N'])} as {cells(p)}"
            for p in props]


def refine_after_grid(preset, results: str, executor: Executor, rep):
    """Refinement rounds after a finished grid (``sweep --refine``): each round's runs go to
    ``executor``, the grid's (worker processes it starts get ``--refine-round CELLS``, the round's
    cells as this process planned them: :meth:`~depthwidth.experiments.executors.Executor.with_child_flags`,
    :func:`cells_preset`); returns ``rep`` (the grid's SweepReport) with the rounds' trained and
    failed runs added. Progress lines on stderr."""
    if rep.remaining:
        print(f"[refine] the grid has {rep.remaining} run(s) without a record: not refining yet", file=sys.stderr)
        return rep
    trained, failed = list(rep.trained), list(rep.failed)
    for rnd in range(1, 1000):
        sub, props = round_preset(preset, results)
        if not sub.runs:
            msg = "no pair needs another size" if not props else "the run budget (refine.max_runs) is spent"
            print(f"[refine] done after {rnd - 1} round(s): {msg}", file=sys.stderr)
            break
        for line in describe(props):
            print(f"[refine] round {rnd}: {line}", file=sys.stderr)
        r = executor.with_child_flags("--refine-round", format_cells(round_cells(sub))).run(sub, results)
        trained += r.trained
        failed += r.failed
        if r.failed or r.remaining:
            break
    rep.trained, rep.failed = trained, failed
    return rep
