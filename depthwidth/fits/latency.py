"""The measured latency model: forward seconds ≈ FLOPs / R + c·L, fitted to stored latency records.

Records of kind "latency" (:mod:`depthwidth.experiments.latency`, read from disk here, never
measured) are grouped by what the model cannot predict across: the device, the thread count,
the dtype and whether the head was timed. Within a group the model is

    t(L, d, T, B) = F(L, d, T, B) / R + c · L

with F the forward FLOPs as the records store them (2·12·L·d²·B·T matmuls, 4·L·T²·d·B attention
over the full T×T matrix, + 2·V·d·B·T with a head; Kaplan et al. 2020 Table 1): one sustained
rate R (FLOP/s) for the arithmetic, and a serial cost c (seconds per layer) that no amount of
parallel hardware removes -- the "depth is serial" term (docs/concepts.md, two knobs). Two coefficients fitted
by non-negative least squares (``scipy.optimize.nnls``) on relative errors (each row divided by
its measured time, so a 3 s shape does not drown a 0.3 s one). With n shapes the fit has n − 2
degrees of freedom; with 2 it interpolates and its residuals say nothing. Its residuals (and the
shape of them) are how far one rate plus a per-layer cost is from the truth; the model is what a
latency-aware ``query`` could use (:func:`predict_seconds`).
"""

from __future__ import annotations

from typing import Any

from depthwidth.errors import UserError

GROUP_KEYS = ("device", "threads", "dtype", "with_head")
FORMULA = "seconds = flops_total / rate + per_layer_s * n_layer"


def latency_rows(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat dict per finished latency record (spec fields + measured fields), sorted by
    group then depth. Raises UserError for a record that lacks the measured fields."""
    rows = []
    for r in recs:
        if r.get("kind") != "latency" or r.get("status") != "finished":
            continue
        try:
            row = {**r["config"], "run_id": r["run_id"], "params": r["params"]}
            for k in ("seconds", "seconds_min", "seconds_max", "flops_total", "flops_matmul", "flops_attention",
                      "flops_per_s", "attention_share", "compile_s"):
                row[k] = r[k]
        except KeyError as e:
            raise UserError(f"latency record {r.get('run_id')} lacks field {e}") from None
        rows.append(row)
    return sorted(rows, key=lambda x: (tuple(str(x[k]) for k in GROUP_KEYS), x["n_layer"], x["d_model"]))


def group_key(row: dict[str, Any]) -> tuple:
    return tuple(row[k] for k in GROUP_KEYS)


def fit_latency_model(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Fit the module's model to ``rows`` (one group, :func:`latency_rows`).

    Returns None with fewer than 2 distinct depths (c and R cannot be told apart), else a dict:
    ``formula``, ``rate_flops_per_s`` R (None when the fit gives the FLOPs no weight),
    ``per_layer_s`` c, ``dof`` (rows − 2), ``residuals`` per row (run id, shape, measured and
    predicted s, relative residual), ``max_abs_rel_residual``, and the group's fields.
    Raises UserError when the rows mix groups.
    """
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.optimize import nnls

    if len({group_key(r) for r in rows}) > 1:
        raise UserError("fit_latency_model: the rows mix devices, threads, dtypes or head/no head")
    if len({r["n_layer"] for r in rows}) < 2:
        return None
    t = np.array([r["seconds"] for r in rows], dtype=float)
    A = np.array([[r["flops_total"], r["n_layer"]] for r in rows], dtype=float)
    scale = A.max(axis=0)  # columns of order 1, so nnls is well conditioned
    coef, _ = nnls((A / scale) / t[:, None], np.ones_like(t))
    coef = coef / scale
    pred = A @ coef
    res = [{"run_id": r["run_id"], "shape": f"{r['n_layer']}x{r['d_model']}", "seq_len": r["seq_len"],
            "batch": r["batch"], "seconds": float(s), "predicted_s": float(p), "rel_residual": float(s / p - 1)}
           for r, s, p in zip(rows, t, pred)]
    return {"formula": FORMULA, **{k: rows[0][k] for k in GROUP_KEYS},
            "rate_flops_per_s": float(1 / coef[0]) if coef[0] > 0 else None,
            "per_layer_s": float(coef[1]), "dof": len(rows) - 2, "residuals": res,
            "max_abs_rel_residual": max(abs(x["rel_residual"]) for x in res)}


def describe(model: dict[str, Any]) -> str:
    """The fitted model in words: ``"FLOPs / 123 GFLOP/s + 4.56 ms x L"``."""
    rate = model["rate_flops_per_s"]
    flops = f"FLOPs / {rate / 1e9:.4g} GFLOP/s" if rate else "0 x FLOPs"
    return f"{flops} + {model['per_layer_s'] * 1e3:.4g} ms x L"


def predict_seconds(model: dict[str, Any], n_layer: int, d_model: int, seq_len: int, batch: int = 1,
                    vocab_size: int = 0) -> float:
    """Forward seconds the fitted ``model`` predicts for a shape (FLOPs as the records count them:
    :func:`depthwidth.theory.compute.forward_flops_per_token`, "full" convention, × B·T)."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.theory import compute

    flops = int(compute.forward_flops_per_token(n_layer, d_model, seq_len, vocab_size, "full", vocab_size > 0))
    rate = model["rate_flops_per_s"]
    return (flops * seq_len * batch / rate if rate else 0.0) + model["per_layer_s"] * n_layer


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per group: the rows with ``slowdown`` (seconds / the shallowest shape's at the same T and
    B) added, and the group's fitted model (None when it cannot be fitted)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(group_key(r), []).append(dict(r))
    out = []
    for key, grows in groups.items():
        for r in grows:
            same = [x for x in grows if (x["seq_len"], x["batch"]) == (r["seq_len"], r["batch"])]
            base = min(same, key=lambda x: (x["n_layer"], -x["d_model"]))
            r["slowdown"] = r["seconds"] / base["seconds"]
        out.append({**dict(zip(GROUP_KEYS, key)), "rows": grows, "model": fit_latency_model(grows)})
    return out
