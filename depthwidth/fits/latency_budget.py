"""``query --params N --max-ms-per-token X``: the law's optimal shape under a per-token latency budget.

Issue 44, item 3. For each budget N the law gives an optimal depth L_opt and width d_opt
(:func:`depthwidth.fits.projections.query_budget`); a measured decode-latency model
(``exp latency --decode``'s ``decode_model.json``, :mod:`depthwidth.fits.latency_decode`)
predicts its seconds per token. If L_opt meets the budget, that is the answer, with its
predicted latency. If not, the answer is the integer depth L of the same non-embedding weight
12·L·d² (d = sqrt(N/(12·L))) that meets the budget and lies nearest L_opt (in |ln(L/L_opt)|;
the deeper of two equally near), with its latency and L/L_opt. The issue asks for "the deepest
shape that meets the budget", which assumes latency grows with depth; on the CPU measured here
it does not (docs/guide/decoding.md), so the nearest depth is what keeps the answer closest to
the law. The depth-to-width law (Levine et al. 2020) says which depth is optimal, not how much
loss another depth costs, so no predicted cost of the move is given. No depth meeting the budget
is a one-line refusal. The predicted latencies carry the model's residuals, printed beside them.

Kept apart from :mod:`depthwidth.fits.cli` (one hook there): light, stdlib only.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits import latency_decode as dec
from depthwidth.units import format_count, parse_float

DEFAULT_MODEL = "results/exp-latency/decode_model.json"
MAX_DEPTH_FACTOR = 8  # depths searched: 1 .. 8·L_opt (and at least 64)


def add_args(q: argparse.ArgumentParser) -> None:
    q.add_argument("--max-ms-per-token", metavar="MS",
                   help="with --params: a per-token decode latency budget in milliseconds; the answer is the law's "
                        "optimal shape if the --latency model predicts it meets the budget, else the depth nearest "
                        "it that does (docs/guide/decoding.md)")
    q.add_argument("--latency", metavar="FILE",
                   help=f"with --max-ms-per-token: a decode-latency model (exp latency --decode's decode_model.json; "
                        f"default {DEFAULT_MODEL})")


def load_models(path: str | Path) -> list[dict[str, Any]]:
    """The fitted models of a ``decode_model.json``. UserError when the file is missing, not JSON,
    not a decode-latency model (another kind's file, e.g. exp latency's latency_model.json) or
    holds no fitted model."""
    p = Path(path)
    try:
        obj = json.loads(p.read_text())
    except FileNotFoundError:
        raise UserError(f"--latency {path}: no such file (exp latency --decode writes RESULTS/decode_model.json)") from None
    except (OSError, ValueError) as e:
        raise UserError(f"--latency {path}: cannot read it as JSON: {e}") from None
    if not isinstance(obj, dict) or obj.get("formula") != dec.FORMULA:
        raise UserError(f"--latency {path} is not a decode-latency model (formula {dec.FORMULA!r}); "
                        "use exp latency --decode's decode_model.json")
    models = [m for m in obj.get("models") or [] if isinstance(m, dict)]
    if not models:
        raise UserError(f"--latency {path} holds no fitted model (it needs 4 shapes of 2 depths or more)")
    return models


def _shape(L: float, d: float, model: dict[str, Any], vocab: int | None) -> dict[str, Any]:
    return {"n_layer": L, "d_model": d, "seconds_per_token": dec.predict_seconds(model, L, d, vocab)}


def answer(result: dict[str, Any], budget_s: float, model: dict[str, Any], vocab: int | None) -> dict[str, Any]:
    """The latency answer for one ``query_budget`` result under one model (module doc). Returns
    ``meets`` (the optimum meets the budget), ``optimal`` and ``chosen`` shapes with their predicted
    seconds per token, ``depth_ratio`` L/L_opt, the model's device and ``max_abs_rel_residual``.
    Raises UserError when no depth from 1 to max(64, 8·L_opt) meets the budget."""
    L_opt, N = result["optimal_depth"], result["non_embedding_params"]
    opt = _shape(L_opt, result["optimal_width"], model, vocab)
    base = {"device": model["device"], "threads": model["threads"], "budget_ms_per_token": 1e3 * budget_s,
            "max_abs_rel_residual": model["max_abs_rel_residual"], "optimal": opt, "law_cost": None,
            "law_cost_note": "the depth-to-width law gives the optimal depth, not the loss of another depth"}
    if opt["seconds_per_token"] <= budget_s:
        return {**base, "meets": True, "chosen": opt, "depth_ratio": 1.0}
    top = max(64, math.ceil(MAX_DEPTH_FACTOR * L_opt))
    fits = [s for s in (_shape(L, math.sqrt(N / (12 * L)), model, vocab) for L in range(1, top + 1))
            if s["seconds_per_token"] <= budget_s]
    if not fits:
        fastest = min((_shape(L, math.sqrt(N / (12 * L)), model, vocab) for L in range(1, top + 1)),
                      key=lambda s: s["seconds_per_token"])
        raise UserError(f"no depth 1..{top} meets {1e3 * budget_s:g} ms/token at N={format_count(N)} on "
                        f"{model['device']}: the fastest, {fastest['n_layer']}x{fastest['d_model']:.0f}, is predicted "
                        f"at {1e3 * fastest['seconds_per_token']:.4g} ms")
    chosen = min(fits, key=lambda s: (abs(math.log(s["n_layer"] / L_opt)), -s["n_layer"]))
    return {**base, "meets": False, "chosen": chosen, "depth_ratio": chosen["n_layer"] / L_opt}


def _budget_and_models(args: argparse.Namespace) -> tuple[float, list[dict[str, Any]]] | None:
    """(seconds per token, the models) of ``--max-ms-per-token`` and ``--latency``; None without a
    budget. UserError as :func:`apply` says."""
    if args.max_ms_per_token is None:
        if args.latency is not None:
            raise UserError("--latency needs --max-ms-per-token")
        return None
    budget_s = parse_float(args.max_ms_per_token, name="--max-ms-per-token", what="a latency in ms") / 1e3
    if args.params is None:
        raise UserError("--max-ms-per-token answers --params budgets only")
    return budget_s, load_models(args.latency or DEFAULT_MODEL)


def apply(args: argparse.Namespace, results: list[dict[str, Any]], vocab: int) -> list[str]:
    """The ``query`` hook: with ``--max-ms-per-token``, add ``latency`` (one :func:`answer` per model
    in the file) to each --params result and return the text lines; [] without it. UserError for
    a budget that is not a positive number, --latency without a budget, or a budget without --params."""
    got = _budget_and_models(args)
    if got is None:
        return []
    budget_s, models = got
    lines = []
    for r in results:
        r["latency"] = [answer(r, budget_s, m, vocab or None) for m in models]
        for a in r["latency"]:
            lines.append(_line(r, a))
    return lines


def apply_forms(args: argparse.Namespace, results: list[dict[str, Any]]) -> list[str]:
    """The same hook for ``query`` on a fit with a form comparison beside it
    (:func:`depthwidth.fits.forms_query.answer_forms` results): each surviving form's optimum is
    judged under the budget as one law's is (:func:`answer`), per model, and stored as that form's
    ``latency``. A form none of whose depths meets the budget gets ``latency_error`` and a line
    saying so, since another form may still answer; when no form can, UserError (one line).
    The head's vocabulary is the model's own (the forms answer for non-embedding N only)."""
    got = _budget_and_models(args)
    if got is None:
        return []
    budget_s, models = got
    lines, errors, answered = [], [], False
    for r in results:
        for f in r["forms"]:
            if not math.isfinite(f["depth"]) or f["depth"] <= 0:
                f["latency_error"] = "the form gives no finite optimal depth at this budget"
                lines.append(f"{f['form']}: N={format_count(r['budget'])}: {f['latency_error']}")
                continue
            opt = {"optimal_depth": f["depth"], "optimal_width": f["width"], "non_embedding_params": r["budget"]}
            try:
                f["latency"] = [answer(opt, budget_s, m, None) for m in models]
            except UserError as e:
                f["latency_error"] = str(e)
                errors.append(str(e))
                lines.append(f"{f['form']}: {e}")
                continue
            answered = True
            lines += [f"{f['form']}: " + _line(r, a) for a in f["latency"]]
    if not answered:
        raise UserError(errors[0] if errors else "no form gives a finite optimal depth at these budgets")
    return lines


def _line(r: dict[str, Any], a: dict[str, Any]) -> str:
    o, c = a["optimal"], a["chosen"]
    head = (f"N={format_count(r['budget'])}, {a['budget_ms_per_token']:g} ms/token on {a['device']} "
            f"({a['threads']} thread(s); the latency model's residuals reach {100 * a['max_abs_rel_residual']:.0f}%): ")
    if a["meets"]:
        return head + f"the optimal depth {o['n_layer']:.1f} (width {o['d_model']:.0f}) meets it at " \
                      f"{1e3 * o['seconds_per_token']:.4g} ms/token predicted"
    return head + (f"the optimal depth {o['n_layer']:.1f} is predicted at {1e3 * o['seconds_per_token']:.4g} ms; "
                   f"the nearest depth that meets it is {c['n_layer']}x{c['d_model']:.0f} at "
                   f"{1e3 * c['seconds_per_token']:.4g} ms (L/L_opt = {a['depth_ratio']:.2f}; the law gives no "
                   "loss cost for the move)")
