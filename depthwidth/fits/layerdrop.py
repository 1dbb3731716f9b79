"""The layer-deletion result from stored records: loss increase per (k, offset), the width control.

Reads the records of kind ``layerdrop`` (:mod:`depthwidth.experiments.layerdrop` writes them;
this module never imports it) of one trained run and reduces them to what the README and the
figure report: for every run length k the test-loss increase Δ (nats/token, deleted model minus
the full model) at each offset (the first deleted block, 0-based), the cheapest and the most
expensive offset, the first-block and the last-block deletion, and the width control (the same
number of parameters removed as MLP hidden units from every block): Δ of each random choice
(mean, min, max) and of the smallest-norm choice.

Uncertainty from the evaluation set: each record stores the test loss of 32 consecutive chunks
of the test windows (the same chunks for every deletion, :func:`depthwidth.models.engine.evaluate`),
so the paired difference of chunk losses gives a standard error of Δ
(std of the 32 chunk differences / √32): how much Δ depends on which held-out text was used,
not on the training seed (one seed here).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from depthwidth import records
from depthwidth.errors import UserError

KIND = "layerdrop"


def load(results) -> list[dict[str, Any]]:
    """The finished ``layerdrop`` records under ``results`` (UserError if there are none)."""
    recs = [r for r in records.records_of_kind(results, KIND) if r["status"] == "finished"]
    if not recs:
        raise UserError(f"{results}: no layerdrop records (run `depthwidth exp layerdrop` first)")
    return recs


def paired_se(rec: dict[str, Any], base: dict[str, Any]) -> float | None:
    """Standard error (nats/token) of ``rec``'s Δ from its per-chunk losses paired with the full
    model's (module doc); None when either lacks chunks or they differ in number."""
    a, b = rec.get("test_loss_chunks"), base.get("test_loss_chunks")
    if not a or not b or len(a) != len(b) or len(a) < 2:
        return None
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return float(diff.std(ddof=1) / math.sqrt(len(diff)))


def _one_run(recs: list[dict[str, Any]]) -> str:
    runs = sorted({r["config"]["run_id"] for r in recs})
    if len(runs) != 1:
        raise UserError(f"layerdrop records of {len(runs)} trained runs ({', '.join(runs)}): pass --run-id")
    return runs[0]


def summarise(recs: list[dict[str, Any]], run_id: str | None = None) -> dict[str, Any]:
    """The result of one trained run's deletions (module doc), JSON-ready.

    Keys: ``run_id``, ``n_layer`` (L), ``d_model``, ``d_ff``, ``base_test_loss``, ``stack_params``,
    and ``by_k``: {k: {"offsets": [start...], "delta": [Δ...], "se": [...], "removed_params",
    "cheapest": {"start", "delta"}, "dearest": {...}, "first": Δ(start 0), "last": Δ(start L-k),
    "control": {"units_per_layer", "fraction_of_mlp", "removed_params", "random": [Δ...],
    "random_mean", "norm": Δ or None}}}. Raises UserError when the records hold no full-model
    unit or belong to several trained runs and ``run_id`` is not given.
    """
    run_id = run_id or _one_run(recs)
    mine = [r for r in recs if r["config"]["run_id"] == run_id]
    base = next((r for r in mine if r["config"]["deletion"]["what"] == "none"), None)
    if base is None:
        raise UserError(f"no full-model (0-layer deletion) record for run {run_id}")
    L = base["n_layer"]
    out: dict[str, Any] = {"run_id": run_id, "n_layer": L, "d_model": base["d_model"], "d_ff": base["d_ff"],
                           "base_test_loss": base["test_loss"], "stack_params": base["stack_params"],
                           "test_sequences": base["test_sequences"], "by_k": {}}
    for k in sorted({r["config"]["deletion"]["k"] for r in mine} - {0}):
        out["by_k"][k] = _per_k(mine, base, k, L)
    return out


def _per_k(mine: list[dict[str, Any]], base: dict[str, Any], k: int, L: int) -> dict[str, Any]:
    lay = sorted((r for r in mine if r["config"]["deletion"]["what"] == "layers" and r["config"]["deletion"]["k"] == k),
                 key=lambda r: r["config"]["deletion"]["start"])
    ctl = [r for r in mine if r["config"]["deletion"]["what"] == "mlp_units" and r["config"]["deletion"]["k"] == k]
    row: dict[str, Any] = {"offsets": [r["config"]["deletion"]["start"] for r in lay],
                           "delta": [r["delta_test_loss"] for r in lay], "se": [paired_se(r, base) for r in lay],
                           "removed_params": lay[0]["removed_params"] if lay else None}
    if lay:
        by_start = dict(zip(row["offsets"], row["delta"]))
        i_min, i_max = int(np.argmin(row["delta"])), int(np.argmax(row["delta"]))
        row["cheapest"] = {"start": row["offsets"][i_min], "delta": row["delta"][i_min]}
        row["dearest"] = {"start": row["offsets"][i_max], "delta": row["delta"][i_max]}
        row["first"], row["last"] = by_start.get(0), by_start.get(L - k)
    if ctl:
        rnd = [r["delta_test_loss"] for r in sorted(ctl, key=lambda r: r["config"]["deletion"].get("seed", -1))
               if r["config"]["deletion"]["choice"] == "random"]
        norm = [r["delta_test_loss"] for r in ctl if r["config"]["deletion"]["choice"] == "norm"]
        m = ctl[0]["config"]["deletion"]["units_per_layer"]
        row["control"] = {"units_per_layer": m, "fraction_of_mlp": m / base["d_ff"],
                          "removed_params": ctl[0]["removed_params"], "random": rnd,
                          "random_mean": float(np.mean(rnd)) if rnd else None,
                          "norm": norm[0] if norm else None}
    return row
