"""The measured decode-latency model: seconds/token ≈ a + L·c + bytes/bandwidth, fitted to stored records.

Records of kind "latency_decode" (:mod:`depthwidth.experiments.latency_decode`, read from disk
here) are grouped by device, threads, dtype, batch and context (what the model does not predict
across). Within a group:

    t(L, d) = a + c·L + bytes(L, d) / W,   bytes = L·(s·(12d² + 13d) + 2·s·B·S·d) + s·(V·d + 2d)

a: a fixed cost per token (dispatch of the jitted step, sampling; seconds), c: a serial cost per
layer (seconds), W: a sustained memory bandwidth (bytes/s); ``bytes`` is what the step reads
(weights once, each layer's K/V cache of S positions, the tied head; s = bytes per value).
This is issue 44's a + L·(c + bytes(d)/bandwidth) with the head's bytes, which do not scale with
L, put in the bytes term rather than in a. Its assumptions: batch-1 decoding reads every weight
once per token and does 2 FLOPs per weight read, so on a CPU it is memory-bound (time ∝ bytes)
plus overheads that do not depend on width; caches and prefetchers are ignored (a model whose
weights fit the last-level cache would beat W), and so is the cost of the softmax over the
cache. Three coefficients by non-negative least squares (``scipy.optimize.nnls``) on relative
errors; n shapes leave n − 3 degrees of freedom.
"""

from __future__ import annotations

from typing import Any

from depthwidth.errors import UserError
from depthwidth.theory.decode_bytes import step_bytes

GROUP_KEYS = ("device", "threads", "dtype", "batch", "context")
ITEMSIZE = {"float32": 4, "bfloat16": 2}
FORMULA = "seconds_per_token = fixed_s + per_layer_s * n_layer + bytes_total / bandwidth_bytes_per_s"
_MEASURED = ("seconds_per_token", "seconds_per_token_min", "seconds_per_token_max", "prefill_s", "prefill_s_min",
             "prefill_s_max", "bytes_total", "bytes_layer", "bytes_head", "bytes_per_s", "compile_s")


def decode_rows(recs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One flat dict per finished latency_decode record (spec + measured fields), sorted by group,
    then weights, then depth. Raises UserError for a record that lacks a measured field."""
    rows = []
    for r in recs:
        if r.get("kind") != "latency_decode" or r.get("status") != "finished":
            continue
        try:
            rows.append({**r["config"], "run_id": r["run_id"], "params": r["params"], **{k: r[k] for k in _MEASURED}})
        except KeyError as e:
            raise UserError(f"latency_decode record {r.get('run_id')} lacks field {e}") from None
    return sorted(rows, key=lambda x: (tuple(str(x[k]) for k in GROUP_KEYS), x["n_layer"] * x["d_model"] ** 2,
                                       x["n_layer"]))


def fit_decode_model(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Fit the module's model to one group's rows. None with fewer than 4 rows or 2 depths (3
    coefficients). Returns ``fixed_s`` a, ``per_layer_s`` c, ``bandwidth_bytes_per_s`` W (None
    when the fit gives the bytes no weight), ``dof``, ``residuals`` per row (shape, measured and
    predicted s/token, relative residual), ``max_abs_rel_residual``, the group's fields, and what
    the bytes were counted with (``vocab_size``, ``cache_len``, ``itemsize``; None where rows differ).
    Raises UserError when the rows mix groups."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.optimize import nnls

    if len({tuple(r[k] for k in GROUP_KEYS) for r in rows}) > 1:
        raise UserError("fit_decode_model: the rows mix devices, threads, dtypes, batches or contexts")
    if len(rows) < 4 or len({r["n_layer"] for r in rows}) < 2:
        return None
    t = np.array([r["seconds_per_token"] for r in rows], dtype=float)
    A = np.array([[1.0, r["n_layer"], r["bytes_total"]] for r in rows], dtype=float)
    scale = A.max(axis=0)  # columns of order 1, so nnls is well conditioned
    coef, _ = nnls((A / scale) / t[:, None], np.ones_like(t))
    coef = coef / scale
    pred = A @ coef
    res = [{"run_id": r["run_id"], "shape": f"{r['n_layer']}x{r['d_model']}", "params": r["params"],
            "seconds_per_token": float(s), "predicted_s": float(p), "rel_residual": float(s / p - 1)}
           for r, s, p in zip(rows, t, pred)]
    # what the bytes term was measured with, so a prediction for another shape counts the same bytes
    same = {k: rows[0][k] if len({r[k] for r in rows}) == 1 else None for k in ("vocab_size", "new_tokens")}
    return {"formula": FORMULA, **{k: rows[0][k] for k in GROUP_KEYS}, "vocab_size": same["vocab_size"],
            "cache_len": rows[0]["context"] + same["new_tokens"] if same["new_tokens"] else None,
            "itemsize": ITEMSIZE[rows[0]["dtype"]], "fixed_s": float(coef[0]),
            "per_layer_s": float(coef[1]), "bandwidth_bytes_per_s": float(1 / coef[2]) if coef[2] > 0 else None,
            "dof": len(rows) - 3, "residuals": res, "max_abs_rel_residual": max(abs(x["rel_residual"]) for x in res)}


def describe(model: dict[str, Any]) -> str:
    """The fitted model in words: ``"0.12 ms + 0.034 ms x L + bytes / 9.8 GB/s"``."""
    bw = model["bandwidth_bytes_per_s"]
    return (f"{model['fixed_s'] * 1e3:.4g} ms + {model['per_layer_s'] * 1e3:.4g} ms x L + "
            + (f"bytes / {bw / 1e9:.4g} GB/s" if bw else "0 x bytes"))


def predict_seconds(model: dict[str, Any], n_layer: float, d_model: float, vocab_size: int | None = None) -> float:
    """Seconds per token the fitted ``model`` predicts for a shape (L, d may be fractional): its
    a + c·L + bytes/W, the bytes counted at the model's batch, cache length and dtype
    (:func:`depthwidth.theory.decode_bytes.step_bytes`) with ``vocab_size`` V (default: the V the
    records were measured with). Raises UserError when V is neither given nor known."""
    vocab = vocab_size if vocab_size is not None else model.get("vocab_size")
    if vocab is None or model.get("cache_len") is None:
        raise UserError("this decode-latency model does not say its vocabulary or cache length; give --vocab "
                        "or refit it with exp latency --decode")
    b = step_bytes(n_layer, d_model, vocab, model["cache_len"], model["batch"], model["itemsize"])["total"]
    bw = model["bandwidth_bytes_per_s"]
    return model["fixed_s"] + model["per_layer_s"] * n_layer + (b / bw if bw else 0.0)


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per group: the rows with ``slowdown`` (s/token over the shallowest shape of the same weight
    count 12·L·d²) added, and the group's fitted model (None when it cannot be fitted)."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in GROUP_KEYS), []).append(dict(r))
    out = []
    for key, grows in groups.items():
        for r in grows:
            same = [x for x in grows if x["n_layer"] * x["d_model"] ** 2 == r["n_layer"] * r["d_model"] ** 2]
            r["slowdown"] = r["seconds_per_token"] / min(same, key=lambda x: x["n_layer"])["seconds_per_token"]
        out.append({**dict(zip(GROUP_KEYS, key)), "rows": grows, "model": fit_decode_model(grows)})
    return out
