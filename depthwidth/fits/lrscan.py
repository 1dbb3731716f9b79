"""Learning-rate scans: is a preset's lr rule near the optimum for every shape?

Reads a results directory of runs that differ in ``train.lr`` (e.g. the ``lrscan`` preset) and,
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


def rule_lr(d_model: int, c: float, power: float = 1.0) -> float:
    """lr = c / d_model**power (c = base lr x ref_width**power of the preset's grid.lr_rule)."""
    return c / d_model**power


def scan_rows(records: list[dict[str, Any]], c: float, power: float = 1.0) -> list[dict[str, Any]]:
    """One row per shape (module docstring) from finished records; shapes with < 2 lrs skipped."""
    groups: dict[tuple[int, int, int], list[tuple[float, float]]] = defaultdict(list)
    for r in records:
        if r.get("status") != "finished" or not isinstance(r.get("test_loss"), (int, float)):
            continue
        lr = float(r["config"]["train"]["lr"])
        groups[(int(r["n_layer"]), int(r["d_model"]), int(r["seed"]))].append((lr, float(r["test_loss"])))
    rows = []
    for (L, d, seed), pts in sorted(groups.items()):
        pts.sort()
        if len(pts) < 2:
            continue
        x = np.log([p[0] for p in pts])
        y = np.array([p[1] for p in pts])
        i = int(np.argmin(y))
        row: dict[str, Any] = {"n_layer": L, "d_model": d, "seed": seed, "N": 12 * L * d * d,
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
        inside = x[0] <= math.log(lr_rule) <= x[-1]
        row["rule_loss"] = float(np.polyval(curve, math.log(lr_rule))) if inside else None
        best = min(v for v in (row["loss_opt"], float(y[i])) if v is not None)
        row["regret"] = row["rule_loss"] - best if row["rule_loss"] is not None else None
        rows.append(row)
    return rows


def load_scan(results: str | Path, c: float, power: float = 1.0) -> list[dict[str, Any]]:
    """:func:`scan_rows` over every training record under ``results`` (records of other kinds
    are set aside, as in the results table); UserError if none is usable."""
    from depthwidth.records import TRAIN, iter_records, kind_of

    rows = scan_rows([r for r in iter_records(results) if kind_of(r) == TRAIN], c, power)
    if not rows:
        raise UserError(f"{results}: no shape has finished runs at two or more learning rates")
    return rows
