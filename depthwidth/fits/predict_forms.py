"""A pre-registered test that separates law forms: one unseen depth pair predicted under every
form of a comparison (:mod:`depthwidth.fits.compare`), with its decision rule, and the verdict.

Prediction (``depthwidth predict --forms COMPARISON --pairs LS,LD --out FILE``): per form, the
pair's transition N* with its 95 % interval (:func:`depthwidth.fits.compare.predict_pair`), the
form's standing in the comparison (Akaike weight, excluded or not) and, per pair of surviving
forms, how far apart their predictions are: |Δ ln N*| in units of the expected measurement error
σ_m (and of the combined σ, √(σ_f² + σ_g² + σ_m²)). σ_m is the median bootstrap σ(ln N*) of the
comparison's points with L_s >= 2 (the measured pairs nearest in depth) unless given.

Decision rule (:data:`RULE`, written into the file before any record of the pair exists):

1. The measurement is the pair's transition in the fit of its own results directory with the
   fit's defaults (doubling pairs, PCHIP curves, last down-crossing, geometric depth, paired
   bootstrap of 1,000 replicates, seed 0), after ``sweep --refine`` with the preset's [refine].
2. *Resolved*: the seed means cross (status crossing or multiple) and >= 95 % of the bootstrap
   replicates cross. Then per form z = (ln N*_m − ln N*_f)/√(σ_f² + σ_m²) with σ_m the fit's
   ``sigma_ln_N_star``: |z| <= 1.96 is *consistent*, else the form *fails*. The measurement
   *favours* the surviving form of highest predictive likelihood N(ln N*_m; ln N*_f, σ_f² + σ_m²);
   the comparison's Akaike weights times these likelihoods, normalised, are the updated weights.
3. *Deeper worse over the whole grid* (status deeper_worse_throughout: the deeper net's seed-mean
   loss is above the shallower one's at every N of the common range, after refinement): N* lies
   above the range's top N_hi. A form fails when it gives that less than 2.5 % probability,
   Φ((ln N*_f − ln N_hi)/σ_f) < 0.025; the others are not contradicted. *Deeper better throughout*
   is the mirror image with the range's bottom N_lo.
4. *Not resolved* (a crossing in fewer than 95 % of replicates, or no crossing status above):
   no form is judged; the result is reported as not resolved with the crossing share, and the
   rule is not changed after the fact (more seeds or widths would be a new pre-registration).

Verdict: :func:`verdict_forms` applies the rule to a measured fit.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import math
import statistics
from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits.compare import COMPARE_FORMAT, Z95, predict_pair
from depthwidth.fits.options import MIN_FRACTION
from depthwidth.fits.validation import FORMS_PREDICTION_FORMAT, read_document
from depthwidth.records import code_is_dirty, code_revision

FORMS_PREDICTION_VERSION = 1
_N = statistics.NormalDist()

RULE = {
    "measurement": "the pair's transition in `depthwidth fit` of its own results directory with the defaults "
                   "(doubling pairs, pchip curves, last down-crossing, geom depth, paired bootstrap 1000, seed 0), "
                   "after `depthwidth sweep --refine` with the preset's [refine] table",
    "resolved": f"status crossing or multiple and a crossing in >= {MIN_FRACTION:.0%} of bootstrap replicates",
    "per_form": "z = (ln N*_meas - ln N*_form) / sqrt(sigma_form^2 + sigma_meas^2); |z| <= 1.96 consistent, "
                "else the form fails",
    "favoured": "the surviving form with the highest predictive likelihood N(ln N*_meas; ln N*_form, "
                "sigma_form^2 + sigma_meas^2); updated weights = Akaike weight x likelihood, normalised",
    "deeper_worse_throughout": "N* is above the common range's top N_hi: a form fails when "
                               "Phi((ln N*_form - ln N_hi)/sigma_form) < 0.025; the others are not contradicted",
    "deeper_better_throughout": "N* is below the common range's bottom N_lo: a form fails when "
                                "Phi((ln N_lo - ln N*_form)/sigma_form) < 0.025; the others are not contradicted",
    "not_resolved": "no form is judged; reported as not resolved with the crossing share; the rule is not "
                    "changed after the result (more seeds or widths would be a new pre-registration)",
}


def _likelihood(ln_m: float, ln_f: float, var: float) -> float:
    return math.exp(-0.5 * (ln_m - ln_f) ** 2 / var) / math.sqrt(2 * math.pi * var)


def favoured_ranges(preds: list[dict[str, Any]], sigma_m: float, weights: dict[str, float]) -> list[dict[str, Any]]:
    """Which surviving form a measured N* would favour (highest predictive likelihood, rule 2), as
    ranges of N* for a measurement error ``sigma_m``: [{"form", "from", "to"}] (None: open end),
    found on a grid of ln N* 0.001 apart over ±6 σ of the predictions."""
    alive = [p for p in preds if p["survives"]]
    if not alive:
        return []
    lo = min(p["ln_n_star"] - 6 * max(p["sigma_ln_n_star"], sigma_m) for p in alive)
    hi = max(p["ln_n_star"] + 6 * max(p["sigma_ln_n_star"], sigma_m) for p in alive)
    out: list[dict[str, Any]] = []
    steps = int((hi - lo) / 0.001) + 1
    for i in range(steps + 1):
        x = lo + i * (hi - lo) / steps
        best = max(alive, key=lambda p: _likelihood(x, p["ln_n_star"], p["sigma_ln_n_star"] ** 2 + sigma_m**2))
        if not out or out[-1]["form"] != best["form"]:
            if out:
                out[-1]["to"] = math.exp(x)
            out.append({"form": best["form"], "from": math.exp(x) if out else None, "to": None})
    return out


def _separations(preds: list[dict[str, Any]], sigma_m: float) -> list[dict[str, Any]]:
    alive = [p for p in preds if p["survives"]]
    out = []
    for i, p in enumerate(alive):
        for q in alive[i + 1:]:
            d = abs(p["ln_n_star"] - q["ln_n_star"])
            comb = math.sqrt(p["sigma_ln_n_star"] ** 2 + q["sigma_ln_n_star"] ** 2 + sigma_m**2)
            out.append({"forms": [p["form"], q["form"]], "delta_ln_n_star": d, "in_sigma_meas": d / sigma_m,
                        "in_combined_sigma": d / comb})
    return out


def expected_sigma(cmp: dict[str, Any]) -> float:
    """The expected measurement error σ(ln N*) of a new pair: the median of 2·σ(ln d_x) over the
    comparison's points with L_s >= 2 (all points when none). UserError when there is none."""
    pts = cmp.get("points") or []
    s = [2 * p["sigma_ln_d_x"] for p in pts if p["pair"][0] >= 2] or [2 * p["sigma_ln_d_x"] for p in pts]
    if not s:
        raise UserError("the comparison holds no points to take the expected measurement error from")
    return float(statistics.median(s))


def predict_forms(cmp: dict[str, Any], source: str, raw: bytes, pairs: list[tuple[int, int]],
                  sigma_m: float | None = None) -> dict[str, Any]:
    """The forms-prediction file (module docstring) of ``pairs`` from a comparison file ``cmp``
    (``raw``: its bytes, hashed in). UserError for a file of another format or a pair the
    comparison already holds."""
    if not isinstance(cmp, dict) or cmp.get("format") != COMPARE_FORMAT:
        raise UserError(f"{source}: not a form comparison (format {COMPARE_FORMAT!r}; `fit --compare-forms` writes one)")
    seen = {tuple(p["pair"]) for p in cmp["points"]}
    sigma_m = expected_sigma(cmp) if sigma_m is None else sigma_m
    out_pairs = []
    for pair in pairs:
        if tuple(pair) in seen:
            raise UserError(f"pair ({pair[0]},{pair[1]}) is one the comparison {source} was fitted on: nothing to predict")
        preds = []
        for row in cmp["forms"]:
            p = predict_pair(row, pair)
            p.update(survives=not row["excluded"], aic_weight=row["aic_weight"],
                     excluded_because=row["excluded_because"])
            preds.append(p)
        weights = {r["key"]: r["aic_weight"] for r in cmp["forms"]}
        out_pairs.append({"pair": list(pair), "L": preds[0]["L"], "forms": preds,
                          "separations": _separations(preds, sigma_m),
                          "favoured_ranges": favoured_ranges(preds, sigma_m, weights)})
    return {
        "format": FORMS_PREDICTION_FORMAT, "version": FORMS_PREDICTION_VERSION,
        "created_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "git_rev": code_revision(), "git_dirty": code_is_dirty(),
        "comparison": {"path": source, "sha256": hashlib.sha256(raw).hexdigest(),
                       "pairs": [p["pair"] for p in cmp["points"]], "surviving": cmp["surviving"],
                       "preferred": cmp["preferred"]},
        "sigma_meas_expected": sigma_m,
        "sigma_meas_rule": "median of 2*sigma_ln_d_x over the comparison's points with L_s >= 2",
        "rule": RULE, "predictions": out_pairs,
    }


def read_forms_prediction(path: str) -> dict[str, Any]:
    """A forms-prediction file; UserError (one line) when absent, unreadable or of another format."""
    d = read_document(path)
    if not isinstance(d, dict) or d.get("format") != FORMS_PREDICTION_FORMAT \
            or d.get("version") != FORMS_PREDICTION_VERSION or not isinstance(d.get("predictions"), list):
        raise UserError(f"{path}: not a forms-prediction file (format {FORMS_PREDICTION_FORMAT!r}, "
                        f"version {FORMS_PREDICTION_VERSION})")
    return d


def _measured(fit: dict[str, Any], pair: list[int]) -> dict[str, Any] | None:
    for key in ("points", "not_fitted", "no_crossing"):
        for p in fit.get(key) or []:
            if [p.get("L_s"), p.get("L_d")] == list(pair):
                return p
    return None


def _judge_range(pred: dict[str, Any], point: dict[str, Any]) -> list[dict[str, Any]]:
    """Rule 3: a measurement beyond one end of the common range."""
    lo, hi = point["N_range"]
    rows = []
    for f in pred["forms"]:
        s = max(f["sigma_ln_n_star"], 1e-12)
        if point["status"] == "deeper_worse_throughout":
            prob = _N.cdf((f["ln_n_star"] - math.log(hi)) / s)
        else:
            prob = _N.cdf((math.log(lo) - f["ln_n_star"]) / s)
        rows.append({"form": f["form"], "survived_comparison": f["survives"], "probability_of_outcome": prob,
                     "status": "fails" if prob < 0.025 else "not contradicted"})
    return rows


def verdict_forms(pred: dict[str, Any], fit: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdict of a measured fit against a forms-prediction file, per predicted pair
    (:data:`RULE`): {"pair", "outcome" (resolved | deeper_worse_throughout | deeper_better_throughout |
    not resolved | not measured), "measured": {...}, "forms": [per-form rows], "favoured"}."""
    out = []
    for pp in pred["predictions"]:
        point = _measured(fit, pp["pair"])
        row: dict[str, Any] = {"pair": pp["pair"], "favoured": None, "forms": []}
        if point is None:
            out.append({**row, "outcome": "not measured"})
            continue
        share = point.get("bootstrap_fraction")
        row["measured"] = {k: point.get(k) for k in ("status", "N_star", "N_star_ci95", "sigma_ln_N_star",
                                                     "bootstrap_fraction", "N_range")}
        if point.get("status") in ("deeper_worse_throughout", "deeper_better_throughout") and point.get("N_range"):
            out.append({**row, "outcome": point["status"], "forms": _judge_range(pp, point)})
            continue
        if point.get("status") not in ("crossing", "multiple") or share is None or share < MIN_FRACTION \
                or not point.get("sigma_ln_N_star"):
            out.append({**row, "outcome": "not resolved"})
            continue
        ln_m, s_m = point["ln_N_star"], point["sigma_ln_N_star"]
        forms, total = [], 0.0
        for f in pp["forms"]:
            var = f["sigma_ln_n_star"] ** 2 + s_m**2
            z = (ln_m - f["ln_n_star"]) / math.sqrt(var)
            lik = _likelihood(ln_m, f["ln_n_star"], var)
            w = f["aic_weight"] * lik if f["survives"] else 0.0
            total += w
            forms.append({"form": f["form"], "survived_comparison": f["survives"], "z": z,
                          "status": "consistent" if abs(z) <= Z95 else "fails", "likelihood": lik, "_w": w})
        for f in forms:
            f["updated_weight"] = f.pop("_w") / total if total > 0 else None
        alive = [f for f in forms if f["survived_comparison"]]
        out.append({**row, "outcome": "resolved", "forms": forms,
                    "favoured": max(alive, key=lambda f: f["likelihood"])["form"] if alive else None})
    return out
