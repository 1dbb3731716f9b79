"""Learning-rate scans: is a preset's lr rule near the optimum for every shape?

Reads the runs of one or several results directories that differ in ``train.lr`` (e.g. the
``lrscan`` preset, or a sweep at an lr rule read with sweeps at fractions of it) and,
per shape (n_layer, d_model, seed), fits a parabola to test loss against ln(lr) through the
scanned points (least squares; exact through 3 points). Reported per shape:

    lrs, losses          the scanned peak learning rates and test losses (nats/token)
    best_scanned         the scanned lr with the lowest loss, and that loss
    lr_opt, loss_opt     the parabola's vertex, when it is a minimum inside the scanned range
                         (else null: the optimum lies at or beyond an end of the scan)
    rule_lr, rule_loss   the lr a rule gives this width, lr = c / d_model^power, and the
                         parabola's loss there (null outside the scanned range)
    regret               rule_loss - min(loss_opt, best scanned loss): what the rule costs

The parabola in ln(lr) is the usual local model of a learning-rate sweep (loss is smooth and
roughly quadratic in log-lr near its minimum; e.g. the lr sweeps of Kaplan et al. 2020 §D.6 and
Yang et al. 2021, "Tensor Programs V", Fig. 1). numpy only.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.records import TRAIN, iter_records, kind_of, train_record_problem

LR_ROUNDING = 1e-5  # in ln lr: above the 5e-6 relative rounding of a 6-significant-figure lr


def rule_lr(d_model: int, c: float, power: float = 1.0) -> float:
    """lr = c / d_model**power (c = base lr x ref_width**power of the preset's grid.lr_rule)."""
    return c / d_model**power


def _seed_means(records: list[dict[str, Any]]) -> tuple[dict, dict]:
    """Per shape (key (L, d, None)), the seed-mean test loss at each lr that has the shape's most
    seeds, and those seeds. Every lr kept has the same seed set: a mean over other seeds would
    compare seeds, not lrs."""
    by_shape: dict[tuple[int, int], dict[float, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for r in records:
        lr = float(r["config"]["train"]["lr"])
        by_shape[(int(r["n_layer"]), int(r["d_model"]))][lr][int(r["seed"])] = float(r["test_loss"])
    groups, seeds_of = {}, {}
    for (L, d), by_lr in by_shape.items():
        most = max((frozenset(v) for v in by_lr.values()), key=lambda x: (len(x), sorted(x)))
        groups[(L, d, None)] = [(lr, float(np.mean([v[s] for s in sorted(most)])))
                                for lr, v in by_lr.items() if frozenset(v) == most]
        seeds_of[(L, d, None)] = sorted(most)
    return groups, seeds_of


def scan_rows(records: list[dict[str, Any]], c: float, power: float = 1.0, *,
              average_seeds: bool = False) -> list[dict[str, Any]]:
    """One row per shape (module docstring) from finished records; shapes with < 2 lrs skipped.

    ``average_seeds``: one row per (depth, width) instead of per seed, from the seed-mean test
    loss at each lr that has the shape's largest seed set (other lrs are left out); the row's
    ``seed`` is None and ``seeds`` lists the seeds averaged."""
    finished = [r for r in records if r.get("status") == "finished"
                and isinstance(r.get("test_loss"), (int, float)) and not isinstance(r.get("test_loss"), bool)]
    groups: dict[tuple[int, int, int | None], list[tuple[float, float]]] = defaultdict(list)
    seeds_of: dict[tuple[int, int, int | None], list[int]] = {}
    if average_seeds:
        groups, seeds_of = _seed_means(finished)
    else:
        for r in finished:
            key = (int(r["n_layer"]), int(r["d_model"]), int(r["seed"]))
            groups[key].append((float(r["config"]["train"]["lr"]), float(r["test_loss"])))
            seeds_of[key] = [key[2]]
    rows = []
    for (L, d, seed), pts in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        pts.sort()
        if len(pts) < 2:
            continue
        x = np.log([p[0] for p in pts])
        y = np.array([p[1] for p in pts])
        i = int(np.argmin(y))
        row: dict[str, Any] = {"n_layer": L, "d_model": d, "seed": seed, "seeds": seeds_of[(L, d, seed)],
                               "N": 12 * L * d * d,
                               "lrs": [p[0] for p in pts], "losses": y.tolist(),
                               "best_scanned": {"lr": pts[i][0], "loss": float(y[i])},
                               "lr_opt": None, "loss_opt": None}
        curve = np.polyfit(x, y, 2) if len(pts) >= 3 else np.polyfit(x, y, 1)
        if len(pts) >= 3 and curve[0] > 0:
            xv = -curve[1] / (2 * curve[0])
            if x[0] <= xv <= x[-1]:
                row["lr_opt"], row["loss_opt"] = math.exp(xv), float(np.polyval(curve, xv))
        lr_rule = rule_lr(d, c, power)
        row["rule_lr"] = lr_rule
        # Presets store lrs to 6 significant figures (presets._grid_point), so the rule's own lr
        # can sit a few 1e-6 outside the scan it ends: that is still inside.
        inside = x[0] - LR_ROUNDING <= math.log(lr_rule) <= x[-1] + LR_ROUNDING
        row["rule_loss"] = float(np.polyval(curve, math.log(lr_rule))) if inside else None
        best = min(v for v in (row["loss_opt"], float(y[i])) if v is not None)
        row["regret"] = row["rule_loss"] - best if row["rule_loss"] is not None else None
        rows.append(row)
    return rows


def load_scan(results: str | Path | list[str | Path], c: float, power: float = 1.0, *,
              seeds: list[int] | None = None, average_seeds: bool = False,
              excluded: list[str] | None = None) -> list[dict[str, Any]]:
    """:func:`scan_rows` over the training records of one or several results directories.

    Several directories make one scan when each holds other lrs of the same protocol (e.g. a
    sweep at an lr rule and sweeps at fractions of it). Records of other kinds are set aside, as
    in the results table; ``seeds`` keeps only those seeds; ``average_seeds`` as in
    :func:`scan_rows`. A finished record that :func:`depthwidth.records.train_record_problem`
    rejects (an impossible loss, untyped fields) is left out, and ``"<dir>/runs/<id>: <reason>"``
    appended to ``excluded`` when given. Raises UserError (one line) if a
    directory is missing, if a (depth, width, seed, lr) run is in two directories (it would be
    counted twice), if the finished runs differ in anything but shape, lr and seed, or if no
    shape has finished runs at two or more lrs.
    """
    # pandas: ~0.5 s at import; query and --help must not pay it
    from depthwidth.fits.table import check_one_lr_protocol

    dirs = [results] if isinstance(results, (str, Path)) else list(results)
    sourced: list[tuple[str, dict[str, Any]]] = []
    for d in dirs:
        recs = iter_records(d)
        if len(dirs) > 1 and not any(kind_of(r) == TRAIN for r in recs):  # a typo must not pass silently
            raise UserError(f"{d} holds no training records")
        for r in recs:
            if kind_of(r) != TRAIN or r.get("status") != "finished" or (seeds is not None and r.get("seed") not in seeds):
                continue
            why = train_record_problem(r)
            if why is None:
                sourced.append((str(d), r))
            elif excluded is not None:
                excluded.append(f"{d}/runs/{r['run_id']}: {why}")
    if seeds is not None:
        present = {r["seed"] for _, r in sourced}
        absent = [s for s in seeds if s not in present]
        if absent:  # a typo, or a seed not trained yet: never a silently smaller scan
            raise UserError(f"no finished training runs of seed {', '.join(map(str, absent))} in "
                            f"{', '.join(map(str, dirs))}")
    check_one_lr_protocol(sourced, [str(d) for d in dirs])
    kept = [r for _, r in sourced]
    rows = scan_rows(kept, c, power, average_seeds=average_seeds)
    if not rows:
        only = f" (seeds {','.join(map(str, seeds))})" if seeds is not None else ""
        raise UserError(f"{', '.join(map(str, dirs))}{only}: no shape has finished runs at two or more "
                        "learning rates")
    return rows
