"""``depthwidth fit`` (sweep results -> transition points -> law JSON), ``depthwidth lrscan``
(a learning-rate scan -> the best lr per shape and what an lr rule costs) and ``depthwidth query``
(law -> optimal shape for a budget, transition size of a depth, verdict on a shape).

Nothing heavy at module level: ``query`` imports only the stdlib-light law/projections modules
(scipy.optimize inside the solver, numpy only for confidence intervals); ``fit`` imports pandas
and scipy inside its handler.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.fits import latency_budget
from depthwidth.fits.forms import DEFAULT_FORM, FORMS, form_named, form_of_formula
from depthwidth.fits.law import BUILTIN_LAWS, load_fit_file, load_law
from depthwidth.fits.options import FitOptions, parse_bootstrap
from depthwidth.units import (
    format_count,
    format_level,
    parse_count,
    parse_count_list,
    parse_int,
    parse_int_list,
)


def _check_out_dir(out: str, flag: str = "--out", example: str = "fit.json") -> None:
    """Refuse an output file whose local directory is missing, before any work, as most tools do
    (a typo would otherwise create a tree), and one that names a directory (the final rename would
    fail after the work, naming a temporary file); a URL names an object store, which has no
    directories. ``example`` is the file name the error suggests."""
    if storage.is_url(out):
        return
    if Path(out).is_dir():
        raise UserError(f"{flag} {out} is a directory: give a file name, e.g. {Path(out) / example}")
    parent = Path(out).parent
    if not parent.is_dir():
        raise UserError(f"{flag} {out}: " + (f"{parent} is not a directory" if parent.exists()
                                             else f"directory {parent} does not exist (create it first)"))


# The most --samples a query draws. Measured on the law-long fit (`/usr/bin/time`, max RSS of
# `query --params 1M`): 44 MB at 4,000 samples, 131 MB at 1e6 (~90 bytes a sample; 1e12 asked
# numpy for terabytes), 1.1 s vs 5.2 s on a shared core. At 1e6 the 2.5 % quantile's Monte Carlo
# error is ~0.016 % in level.
MAX_SAMPLES = 1_000_000


def _other_b_intervals(law: dict) -> list[str]:
    """b's 95% interval under the fit file's other error conventions (law.error_convention), so a
    poor fit (chi2_red > 1) is not read only through the narrowest one: cov_scaled (normal
    approximation, b ± 1.96·sqrt(cov_scaled[1][1])) and the bootstrap refit's percentiles."""
    v, out = law["b_vs"], []
    rows = []
    if law.get("dof", 0) > 0 and law.get("chi2_red", 0) > 1 and law.get("cov_scaled"):
        half = 1.959963984540054 * math.sqrt(law["cov_scaled"][1][1])
        rows.append(("cov_scaled (cov x chi2_red)", law["b"] - half, law["b"] + half))
    boot = law.get("bootstrap") or {}
    if boot.get("ci95"):
        rows.append((f"bootstrap refit ({boot.get('replicates', '?')} replicates)", *boot["ci95"]["b"]))
    for name, lo, hi in rows:
        paper = "contains" if lo <= v["paper"] <= hi else "excludes"
        theory = "contains" if lo <= v["theory_ln3"] <= hi else "excludes"
        out.append(f"     with {name}: b in [{lo:.4f}, {hi:.4f}], {paper} {v['paper']}, {theory} ln 3")
    return out


def _add_table_args(p: argparse.ArgumentParser) -> None:
    """fit's flags that choose which records form the table (fits.table.load_table)."""
    p.add_argument("--cells-of", default=None, metavar="DIR",
                   help="use only the (depth, width) cells that also have runs in results directory DIR "
                        "(compare two sweeps, e.g. two training lengths, on matched cells)")
    p.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="use only the runs of these seeds (e.g. 0: compare a sweep that has one seed so far "
                        "with the same seed of another)")
    p.add_argument("--tune-lr", nargs="+", action="extend", default=None, metavar="DIR",
                   help="also read these results directories (the same protocol at other learning rates) and "
                        "use, per (depth, width) cell, the lr with the lowest mean validation loss")
    p.add_argument("--also", nargs="+", action="extend", default=None, metavar="DIR",
                   help="also read the records of these results directories, of the same protocol, as if they "
                        "were under --results (e.g. extra seeds trained into a directory of their own)")
    p.add_argument("--reruns", default="refuse", metavar="POLICY",
                   help="a run (same configuration and seed) recorded in two of these directories: refuse "
                        "(default) or first (use the directory named first; the other is listed as a rerun, "
                        "with both test losses and CPU models)")


def _add_which_law_args(p: argparse.ArgumentParser) -> None:
    """fit's flags that judge the law's form and its points (docs/results/which-law.md)."""
    p.add_argument("--compare-forms", action="store_true",
                   help="also fit every law form (constant, linear-depth, log-depth, saturating) to the crossing "
                        "points with their joint bootstrap covariance: chi2, AIC, BIC, leave-one-pair-out z and "
                        "held-out log-likelihood, stored beside the fit (X.json -> X.forms.json; fits.compare)")
    p.add_argument("--point-estimators", action="store_true",
                   help="also locate every pair's N* under four estimators (registered, first crossing, straight "
                        "lines, smooth power-law curves) with per-seed N*, bootstrap and exact seed-enumerated "
                        "crossing shares (minutes), stored beside the fit (X.json -> X.points.json; "
                        "fits.point_estimators)")
    p.add_argument("--rerun-noise", action="store_true",
                   help="with --reruns first: the loss spread of the runs trained twice and what it moves each N* "
                        "by (every run jittered by it, 500 draws), stored beside the fit (X.json -> X.reruns.json; "
                        "fits.reruns)")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("fit", help="transition points and the law ln d_x = a + b*L from sweep results",
                       description="Locate where deeper networks start to win (per depth pair), fit ln d_x = a + "
                                   "b*L (or another --law-form) by weighted least squares, write the fit JSON.")
    p.add_argument("--results", required=True, help="results directory (RESULTS/runs/*/record.json)")
    p.add_argument("--pairs", default=FitOptions.pairs,
                   help=f"depth pairs: doubling (L, 2L) or adjacent (default {FitOptions.pairs})")
    p.add_argument("--assign", default=FitOptions.assign,
                   help="depth given to a point: geom sqrt(Ls*Ld) (default), arith, shallow, deep")
    p.add_argument("--bootstrap", default=str(FitOptions.bootstrap),
                   help=f"bootstrap replicates (default {FitOptions.bootstrap})")
    p.add_argument("--resample", default=FitOptions.resample,
                   help=f"bootstrap: {FitOptions.resample} (default: the same seeds drawn for every cell, plus the "
                        "test-set chunks when recorded), pooled (residuals of all widths of a depth) or seeds (the "
                        "cell's own); add +widths to pooled/seeds to also resample widths")
    p.add_argument("--seed", default=str(FitOptions.seed), help=f"bootstrap random seed (default {FitOptions.seed})")
    p.add_argument("--out", default=None, help="fit JSON to write (default RESULTS/fit.json)")
    _add_table_args(p)
    p.add_argument("--law-form", default=DEFAULT_FORM, metavar="FORM",
                   help=f"functional form of the law: {', '.join(f'{k} ({f.formula})' for k, f in FORMS.items())} "
                        f"(default {DEFAULT_FORM}; fits.forms), stored as law.form in the fit file")
    p.add_argument("--curve", default="pchip", help="how a depth's mean losses are joined: pchip (default) or linear")
    p.add_argument("--crossing", default="last",
                   help="with several down-crossings, N* is the last (default) or the first")
    p.add_argument("--estimators", action="store_true",
                   help="also refit under every estimator (pooled bootstrap, per-seed fits, leave one point out, "
                        "first crossing, linear curves): b's 95%% interval in each, stored beside the fit "
                        "(fit.json -> estimators.json, X.json -> X.estimators.json; fits.estimators)")
    p.add_argument("--prediction", default=None, metavar="FILE",
                   help="a prediction file (depthwidth predict): also print measured vs predicted for its pairs")
    _add_which_law_args(p)
    add_json_flag(p)
    p.set_defaults(func=_fit)

    s = sub.add_parser("lrscan", help="learning-rate scan: per shape, the best lr and what an lr rule costs",
                       description="Per (depth, width, seed): test loss vs ln(lr) through a parabola, its "
                                   "optimum, and the loss at lr = c / d_model^power (fits.lrscan).")
    s.add_argument("--results", required=True, nargs="+", action="extend", metavar="DIR",
                   help="results directory (or several: one scan of the same protocol) of runs that differ in "
                        "train.lr")
    s.add_argument("--seeds", default=None, metavar="S,S,...", help="use only the runs of these seeds")
    s.add_argument("--average-seeds", action="store_true",
                   help="one row per shape: the seed-mean loss at each lr that has the shape's most seeds")
    s.add_argument("--rule-c", default="0.4", help="c of the rule lr = c / d_model^power (default 0.4)")
    s.add_argument("--rule-power", default="1", help="power of the rule (default 1: lr ∝ 1/width)")
    add_json_flag(s)
    s.set_defaults(func=_lrscan)

    r = sub.add_parser("predict", help="pre-register a law's transition for unseen depth pairs; or judge one",
                       description="From a fit file alone, write the predicted transition N* (with 95% intervals) "
                                   "of depth pairs the fit has not seen (fits.predict); with --check, compare a "
                                   "prediction file with a measured fit (the verdict).")
    r.add_argument("--fit", default=None, help="fit JSON: the law to predict from, or with --check the measured fit")
    r.add_argument("--forms", default=None, metavar="COMPARISON",
                   help="instead of --fit: a form comparison (fit --compare-forms's X.forms.json); predict under "
                        "every form, with the decision rule (fits.predict_forms)")
    r.add_argument("--pairs", nargs="+", action="extend", metavar="LS,LD", help="depth pairs to predict, e.g. 3,6 2,3")
    r.add_argument("--out", default=None, help="prediction JSON to write (refuses to overwrite one); with --check, the "
                                               "verdict JSON to write (results/predictions/verdicts/, where query --fit "
                                               "finds a law's record: docs/guide/query.md)")
    r.add_argument("--check", default=None, metavar="PREDICTION",
                   help="a prediction file: print measured vs predicted per pair for the fit given by --fit")
    add_json_flag(r)
    r.set_defaults(func=_predict)

    q = sub.add_parser("query", help="optimal depth/width for a budget, transition size, shape verdict",
                       description="Project a law ln d_x = a + b*L (default: Levine et al. 2020's "
                                   "a=5.039, b=0.0555), or the form a --fit file names (e.g. "
                                   "a + b*ln(L)); N = 12*L*d^2 non-embedding.")
    g = q.add_mutually_exclusive_group(required=True)
    g.add_argument("--params", help="budget(s) in parameters, e.g. 175B or 125M,1.3B,175B,1T. A law answers budgets "
                                    "from the size at which one layer is optimal (319,307 for levine2020) up to 1e15 "
                                    "(1,000x the 1T the paper extrapolates to) and, for a law fitted on depths up to "
                                    "D, up to the size at which 100*D layers are optimal; others are refused "
                                    "(docs/guide/query.md)")
    g.add_argument("--layers", help="depth(s) >= 1: the size at which each is optimal (or, with --width, a verdict); "
                                    "refused where that size is past the largest budget --params answers")
    g.add_argument("--shape", help="shape(s) LxD, e.g. 96x12288 or 12x768,24x1024: verdicts; refused where the "
                                   "size 12*L*D^2 or the depth L is outside what --params and --layers answer")
    q.add_argument("--width", help="with one --layers value: width d_x of the shape to judge")
    q.add_argument("--fit", default="levine2020", help="law: levine2020 (default) or a fit JSON from depthwidth fit")
    q.add_argument("--cov", default="auto",
                   help="covariance from a fit file: auto (default: scaled when chi2_red > 1, else absolute), "
                        "absolute, scaled (x max(1, chi2_red)), bootstrap")
    q.add_argument("--vocab", default="0",
                   help="vocabulary V: budgets then include V*d_x (pass V+T to count learned positions too)")
    q.add_argument("--round-width", default=None,
                   help="with --params: the rounded width is a multiple of this (default 128)")
    q.add_argument("--n-head", default=None, help="with --params: the rounded width is also divisible by this head count")
    q.add_argument("--tolerance", default="0.1", help="near optimal if depth within this factor of optimal (default 0.1); "
                                                     "with --params, the depths the rounded shape is chosen among")
    q.add_argument("--ci-level", default="0.95", help="confidence level (default 0.95)")
    q.add_argument("--samples", default="4000",
                   help=f"Monte Carlo samples for intervals (default 4000, at most {MAX_SAMPLES:,}: each budget's "
                        "root finder holds ~400 bytes and takes ~3 us a sample, so 1M is ~0.4 GB and ~3 s a budget, "
                        "and the interval's own Monte Carlo error is already far below the law's)")
    q.add_argument("--seed", default="0", help="Monte Carlo seed (default 0)")
    latency_budget.add_args(q)
    add_json_flag(q)
    q.set_defaults(func=_query)


# ---------------------------------------------------------------- formatting


def _w(v: float) -> str:
    """A width for a table: whole units, or 4 significant digits once it is too long to read."""
    return f"{v:.0f}" if abs(v) < 1e7 else f"{v:.4g}"


def _ratio(v: float) -> str:
    """A ratio such as d/L: as a width (:func:`_w`) from 1 on, with 2 significant digits below
    (0.12, not 0: a log-depth law's optimum can be deeper than it is wide)."""
    return _w(v) if abs(v) >= 1 else f"{v:.2g}"


def _ci_text(ci: dict | None, key: str, fmt) -> str:
    if not ci or not ci.get(key):
        return "-"
    lo, hi = ci[key]
    return f"[{fmt(lo) if lo is not None else '-'}, {fmt(hi) if hi is not None else '-'}]"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _law_header(law, vocab: float) -> str:
    s = f"law {law.name}: {law.describe('.4g', '.4g')}  (N = 12*L*d_x^2 non-embedding"
    s += f"; budgets include {vocab:g}*d_x embedding)" if vocab else ")"
    return s


def _notes(law, results: list[dict[str, Any]]) -> list[str]:
    notes = []
    if law.ci_note and all(r.get("ci") is None for r in results):
        notes.append(f"note: {law.ci_note}")
    elif "(cov: " in law.source:  # a fit file's law: say which covariance the intervals used
        notes.append(_intervals_line(law.source.partition("(cov: ")[2].rstrip(")"), results))
        # an interval shown as "-" although the law has a covariance: say why (it was only in --json)
        notes += sorted({f"note: {r['ci_note']}" for r in results if r.get("ci") and r.get("ci_note")})
    if any(r.get("extrapolated") for r in results) and law.depth_range:
        lo, hi = law.depth_range
        notes.append(f"* extrapolated: depth outside the law's data range {lo:.3g}-{hi:.3g} layers")
    return notes


# What each --cov covariance of (a, b) is (fits.law.law_from_fit_dict), in words.
_COV_WORDS = {"absolute": "the fit's absolute covariance (the points' error bars alone)",
              "scaled": "the fit's covariance x max(1, chi2_red)",
              "bootstrap": "the covariance of the fit's bootstrap refits"}


def _intervals_line(cov_used: str, results: list[dict[str, Any]]) -> str:
    """One line saying how the intervals were drawn, from the Law's ``(cov: ...)`` tag: e.g.
    "absolute, auto", "scaled, auto: chi2_red 4 > 1" or "bootstrap" (chosen with --cov)."""
    kind, _, auto = cov_used.partition(", ")
    level = next((f"{format_level(r['ci']['level'])} " for r in results if r.get("ci")), "")
    chi2 = auto.partition("chi2_red ")[2].split(" ")[0]
    why = (f"; --cov auto takes that one when chi2_red > 1 (here {chi2}: the points scatter more than their "
           "error bars)" if chi2 else "; --cov auto takes that one unless chi2_red > 1" if auto else f", as --cov {kind} asks")
    return f"intervals: {level}Monte Carlo, (a, b) drawn from a normal with {_COV_WORDS.get(kind, kind)}{why}"


def _star(r: dict[str, Any]) -> str:
    return "*" if r.get("extrapolated") else ""


# ---------------------------------------------------------------- query


def _parse_shape(text: str) -> tuple[float, float]:
    t = text.strip().lower().replace("×", "x")
    if t.count("x") != 1:
        raise UserError(f"shape {text!r} must look like LxD, e.g. 96x12288")
    L, d = t.split("x")
    depth = parse_count(L, name="shape depth")
    if depth < 1:  # as --layers (_depths): no network has less than one layer
        raise UserError(f"shape {text!r}: the depth must be >= 1 layer, got {depth:g}")
    return depth, parse_count(d, name="shape width")


def _positive(text: str, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UserError(f"{name} must be a number, got {text!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise UserError(f"{name} must be a positive number, got {text!r}")
    return v


def _parse_fraction(text: str, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise UserError(f"{name} must be a number, got {text!r}") from None
    if not (0 < v < 1):
        raise UserError(f"{name} must be between 0 and 1, got {text!r}")
    return v


def _query(args: argparse.Namespace) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits import projections as P
    from depthwidth.fits.form_evidence import evidence_line
    from depthwidth.fits.validation import law_validation

    law = load_law(args.fit, args.cov)
    validation = law_validation(args.fit, law)  # bad records beside the fit: one line, before any work
    vocab = parse_int(args.vocab, name="--vocab", minimum=0)
    for flag, given in (("--round-width", args.round_width), ("--n-head", args.n_head)):
        if given is not None and args.params is None:  # silently ignored before (fresh-user check)
            raise UserError(f"{flag} shapes the rounded answer of --params; --layers and --shape answer no rounded shape")
    round_width = parse_int(args.round_width if args.round_width is not None else "128", name="--round-width", minimum=1)
    n_head = parse_int(args.n_head, name="--n-head") if args.n_head is not None else None
    try:
        tolerance = float(args.tolerance)
    except ValueError:
        raise UserError(f"--tolerance must be a number, got {args.tolerance!r}") from None
    if not (tolerance > 0 and math.isfinite(tolerance)):
        raise UserError(f"--tolerance must be > 0, got {args.tolerance!r}")
    level = _parse_fraction(args.ci_level, "--ci-level")
    samples = parse_int(args.samples, name="--samples", minimum=100)
    if samples > MAX_SAMPLES:
        raise UserError(f"--samples must be <= {MAX_SAMPLES:,} (~0.4 GB of memory and ~3 s per budget; more "
                        f"does not narrow the interval's Monte Carlo error usefully), got {args.samples!r}")
    seed = parse_int(args.seed, name="--seed", minimum=0)
    mc = {"level": level, "samples": samples, "seed": seed}
    if args.width is not None and args.layers is None:
        raise UserError("--width needs --layers (or use --shape LxD)")

    comparison = _comparison_beside(args.fit)
    if comparison is not None and args.params is not None:
        return _query_forms(args, law, validation, comparison, vocab, samples)
    evidence = _form_evidence(args.fit, law) if comparison is None else []
    if args.params is not None:
        budgets = parse_count_list(args.params, name="--params")
        try:
            res = [P.query_budget(B, law, vocab=vocab, round_width=round_width, n_head=n_head, tolerance=tolerance, **mc)
                   for B in budgets]
        except UserError as e:
            if str(e).startswith("budget") and re.search(r"\d,\d", args.params):  # '1,3B' meant 1.3B?
                raise UserError(f"{e}; in --params a comma separates budgets: 1.3 billion is 1.3B") from None
            raise
        rows = [[format_count(r["budget"]), f"{r['optimal_depth']:.1f}{_star(r)}", _w(r['optimal_width']),
                 _ratio(r['aspect_ratio']), _ci_text(r["ci"], "optimal_depth", lambda v: f"{v:.1f}"),
                 _ci_text(r["ci"], "optimal_width", _w),
                 f"{r['rounded']['n_layer']}x{_w(r['rounded']['d_model'])} (x{r['rounded']['multiple']})",
                 f"{format_count(r['rounded']['non_embedding_params'] + vocab * r['rounded']['d_model'])}"
                 f" ({r['rounded']['budget_rel_error']:+.1%})"]
                for r in res]
        heads = ["budget", "opt. depth", "opt. width", "d/L", f"{format_level(level)} CI depth",
                 f"{format_level(level)} CI width", "rounded (multiple)", "its size"]
        extra = [_rounding_line(res, tolerance)]
    elif args.layers is not None and args.width is None:
        extra = []
        depths = _depths(args.layers)
        res = [P.query_depth(L, law, vocab=vocab, **mc) for L in depths]
        rows = [[f"{r['n_layer']:g}{_star(r)}", format_count(r["transition_params"]), _w(r['transition_width']),
                 _ci_text(r["ci"], "transition_params", format_count)]
                + ([format_count(r["transition_params_total"])] if vocab else []) for r in res]
        heads = ["depth", "optimal at N", "width there", f"{format_level(level)} CI N"] + (["N incl. vocab"] if vocab else [])
    else:
        extra = []
        if args.layers is not None:
            depths = _depths(args.layers)
            if len(depths) != 1:
                raise UserError("--width takes one --layers value (use --shape for several shapes)")
            shapes = [(depths[0], parse_count(args.width, name="--width"))]
        else:
            items = [s for s in args.shape.split(",") if s.strip()]
            if not items:
                raise UserError("--shape is empty")
            shapes = [_parse_shape(s) for s in items]
        res = [P.query_shape(L, d, law, vocab=vocab, tolerance=tolerance, **mc) for L, d in shapes]
        rows = [[f"{r['n_layer']:g}x{r['d_model']:g}", format_count(r["budget"]),
                 f"{r['optimal_depth']:.1f}{_star(r)}", _w(r['optimal_width']), f"{r['depth_ratio']:.2f}",
                 _ci_text(r["ci"], "depth_ratio", lambda v: f"{v:.2f}"), r["verdict"]] for r in res]
        heads = ["shape", "size", "opt. depth", "opt. width", "L/L_opt", f"{format_level(level)} CI", "verdict"]

    latency = latency_budget.apply(args, res if args.params is not None else [], vocab)  # issue 44: --max-ms-per-token
    text = "\n".join([_law_header(law, vocab), validation["text"], *(evidence_line(e) for e in evidence),
                      _table(heads, rows), *extra, *_notes(law, res), *latency])
    res = [{**r, "validation": validation, "form_evidence": evidence} for r in res]
    emit(args, res[0] if len(res) == 1 else res, text)
    return 0


def _form_evidence(spec: str, law) -> list[dict[str, Any]]:
    """The form comparisons that pooled this fit's records (fits.form_evidence); none for the
    built-in laws and for fit files on a bucket."""
    from depthwidth.fits.form_evidence import comparisons_covering

    if spec in BUILTIN_LAWS or storage.is_url(spec):
        return []
    return comparisons_covering(spec, law.form.formula)


def _comparison_beside(spec: str) -> str | None:
    """The form comparison written beside a fit file (X.json -> X.forms.json by `fit --compare-forms`),
    when there is one on the local disk; None for the built-in laws."""
    if spec in BUILTIN_LAWS or storage.is_url(spec) or not spec.endswith(".json"):
        return None
    path = spec[:-5] + ".forms.json"
    return path if Path(path).is_file() else None


def _query_forms(args: argparse.Namespace, law, validation: dict[str, Any], cmp_path: str, vocab: int,
                 samples: int) -> int:
    """query --params on a fit with a form comparison beside it: every surviving form answers
    (fits.forms_query); one number only when the comparison prefers one form."""
    # numpy: ~0.1 s at import; only a multi-form answer pays it
    from depthwidth.fits.forms_query import answer_forms
    from depthwidth.fits.forms_record import favoured_forms, form_statuses, forms_record, record_texts

    if vocab:
        raise UserError("--vocab: the law forms answer for non-embedding N only; drop --vocab with this fit")
    cmp = load_fit_file(cmp_path, f"{cmp_path} (the form comparison beside --fit)")
    budgets = parse_count_list(args.params, name="--params")
    record = forms_record(cmp_path)  # bad verdict files: one line, before any work
    res = [answer_forms(cmp, cmp_path, B, draws=min(samples, 20000)) for B in budgets]
    latency = latency_budget.apply_forms(args, res)  # each surviving form's optimum under --max-ms-per-token
    preds = record_texts(record)
    judged = form_statuses(record)  # a column only once a pre-registered test has judged the forms
    favoured = favoured_forms(record)
    rows = []
    for r in res:
        for f in r["forms"]:
            ci = f["depth_ci95"]
            rows.append([format_count(r["budget"]), f["form"], f"{f['depth']:.1f}",
                         "-" if ci is None else f"[{ci[0]:.1f}, {ci[1]:.1f}]", _w(f["width"]), _ratio(f["aspect"]),
                         f"{f['aic_weight']:.2f}", "-" if f["heldout_loglik"] is None else f"{f['heldout_loglik']:.2f}"]
                        + (["; ".join(judged.get(f["form"], [])) or "-"] if judged else []))
    heads = ["budget", "form", "opt. depth", "95% CI depth", "opt. width", "d/L", "AIC weight", "held-out loglik",
             *(["pre-registered test"] if judged else [])]
    lines = [f"law forms of {cmp_path} (fits.compare; N = 12*L*d_x^2 non-embedding): surviving "
             + ", ".join(f["form"] for f in res[0]["forms"])
             + (f"; excluded {', '.join(res[0]['excluded'])}" if res[0]["excluded"] else ""),
             validation["text"] + " (the fit's own linear law)",
             "forms' out-of-sample record: " + ("; ".join(preds) if preds else "no pre-registered forms prediction"),
             _table(heads, rows)]
    for r in res:
        spread = "one form" if r["spread"] is None else f"the forms' optimal depths differ {r['spread']:.3g}x"
        lines.append(f"{format_count(r['budget'])}: {spread}; " + (
            f"the comparison prefers {r['preferred']}: {r['single_answer']['depth']:.1f} layers"
            if r["single_answer"] else "no form is preferred, so no single answer"))
        for fav in favoured:
            f = next((x for x in r["forms"] if x["form"] == fav["form"]), None)
            if f is not None:
                ci = "" if f["depth_ci95"] is None else f" [{f['depth_ci95'][0]:.1f}, {f['depth_ci95'][1]:.1f}]"
                weight = (f" and updated weight {fav['weight']:.2f}" if fav["top_form"] == fav["form"] else
                          f"; updated weight {fav['weight']:.2f}, below {fav['top_form']}'s {fav['top_weight']:.2f}")
                lines.append(f"{format_count(r['budget'])}: the pre-registered {fav['pair']} favours {fav['form']} "
                             f"(highest predictive likelihood{weight}): {f['depth']:.1f} layers{ci}")
    lines.append(f"rule: {res[0]['rule']}")
    lines += latency
    top = max((p["N_star"] for p in cmp["points"]), default=None)
    if top and any(B > 10 * top for B in budgets):
        lines.append(f"note: the forms were fitted on transitions up to N* = {format_count(top)}; budgets far above "
                     "that are extrapolations, where the forms diverge")
    out = [{**r, "comparison": cmp_path, "forms_predictions": preds, "forms_record": record, "validation": validation}
           for r in res]
    emit(args, out[0] if len(out) == 1 else out, "\n".join(lines))
    return 0


def _rounding_line(res: list[dict[str, Any]], tolerance: float) -> str:
    """Which rule chose each rounded shape (projections.rounded_shape), in one line."""
    band = res[0]["rounded"]["budget_band"]
    line = (f"rounded: the shape within {band:.1%} of the budget nearest it and the optimal d/L (least sum of log "
            f"distances), depths within {tolerance:.0%} of the optimal (--tolerance)")
    far = [format_count(r["budget"]) for r in res if r["rounded"]["rule"] == "closest to the budget"]
    return line + (f"; none within {band:.1%} at {', '.join(far)}: the one closest to the budget" if far else "")


def _depths(text: str) -> list[float]:
    """``--layers``: depths of at least one layer (the law is a line in L; below one layer it
    answers for networks that cannot exist, e.g. 0.001 layers "optimal at N = 286")."""
    depths = parse_count_list(text, name="--layers")
    low = [L for L in depths if L < 1]
    if low:
        raise UserError(f"--layers must be >= 1 (a depth in layers), got {low[0]:g}")
    return depths


# ---------------------------------------------------------------- predict


def _is_forms_prediction(path: str) -> bool:
    from depthwidth.fits.validation import FORMS_PREDICTION_FORMAT

    try:
        return json.loads(storage.read_bytes(path)).get("format") == FORMS_PREDICTION_FORMAT
    except (OSError, ValueError, AttributeError):
        return False  # read_prediction says what is wrong with it


def _predict_forms(args: argparse.Namespace) -> int:
    # numpy/scipy: ~0.9 s at import; only predicting pays it
    from depthwidth.fits import predict_forms as PF
    from depthwidth.fits.predict import parse_pairs

    if args.fit is not None or args.check is not None:
        raise UserError("predict --forms takes --pairs and --out, not --fit or --check")
    if not args.pairs or not args.out:
        raise UserError("predict --forms needs --pairs and --out")
    _check_out_dir(args.out, example="prediction.json")
    cmp = load_fit_file(args.forms, f"--forms {args.forms}")
    out = PF.predict_forms(cmp, str(args.forms), storage.read_bytes(args.forms), parse_pairs(args.pairs))
    store, name = storage.store_of_file(args.out)
    if not store.write(name, storage.json_text(out), exclusive=True):
        raise UserError(f"{args.out} exists: a prediction is written once (choose another --out)")
    emit(args, {**out, "out": str(args.out)}, "\n".join([*format_forms_prediction(out), f"wrote {args.out}"]))
    return 0


def format_forms_prediction(out: dict[str, Any]) -> list[str]:
    """Text of a forms-prediction file (fits.predict_forms)."""
    c = out["comparison"]
    lines = [f"comparison {c['path']} (sha256 {c['sha256'][:12]}), fitted on "
             + ", ".join(f"({a},{b})" for a, b in c["pairs"]) + f"; surviving: {', '.join(c['surviving'])}"]
    sm = out["sigma_meas_expected"]
    for pp in out["predictions"]:
        rows = [[f["form"], _w(f["d_x"]), format_count(f["n_star"]), _ci_text(f, "ci95", format_count),
                 f"{f['sigma_ln_n_star']:.3f}", f"{f['aic_weight']:.3f}",
                 "survives" if f["survives"] else f"excluded ({f['excluded_because']})"] for f in pp["forms"]]
        lines.append(f"pair ({pp['pair'][0]},{pp['pair'][1]}) at L = {pp['L']:.2f}:")
        lines.append(_table(["form", "d_x", "N*", "95% CI", "sigma ln N*", "AIC weight", "comparison"], rows))
        lines += [f"  {s['forms'][0]} vs {s['forms'][1]}: |d ln N*| = {s['delta_ln_n_star']:.3f} = "
                  f"{s['in_sigma_meas']:.2f} x the expected measurement error {sm:.3f}, "
                  f"{s['in_combined_sigma']:.2f} x the combined sigma" for s in pp["separations"]]
        lines.append("  a measured N* favours: " + "; ".join(
            f"{r['form']} " + (f"below {format_count(r['to'])}" if r["from"] is None else
                               f"above {format_count(r['from'])}" if r["to"] is None else
                               f"from {format_count(r['from'])} to {format_count(r['to'])}")
            for r in pp["favoured_ranges"]) + f" (at measurement error {sm:.3f})")
    return lines


def _check_forms(args: argparse.Namespace, fit: dict[str, Any]) -> int:
    # numpy/scipy: ~0.9 s at import; only judging pays it
    from depthwidth.fits import predict_forms as PF
    from depthwidth.fits.forms_record import forms_verdict_record

    if args.pairs:
        raise UserError("predict --check takes --fit (the measured fit) and --out (the verdict file), no --pairs")
    if args.out:
        _check_out_dir(args.out, example="verdict.json")
    pred = PF.read_forms_prediction(args.check)
    rows = PF.verdict_forms(pred, fit)
    lines = [f"measured {args.fit} against {args.check} (rule: the prediction file's 'rule'):"]
    for v in rows:
        pair = f"({v['pair'][0]},{v['pair'][1]})"
        m = v.get("measured") or {}
        lines.append(f"  {pair}: {v['outcome']}" + (f", measured N* {format_count(m['N_star'])}, crossing share "
                                                  f"{m['bootstrap_fraction']:.3f}" if m.get("N_star") else ""))
        for f in v["forms"]:
            z = f" z = {f['z']:+.2f}," if "z" in f else f" P(outcome) = {f['probability_of_outcome']:.3g},"
            lines.append(f"    {f['form']}:{z} {f['status']}"
                         + (f", updated weight {f['updated_weight']:.3f}" if f.get("updated_weight") is not None else ""))
        if v["favoured"]:
            lines.append(f"    favoured: {v['favoured']}")
    if args.out:  # derived: the same inputs rewrite the same bytes (fits.forms_record)
        _write_verdict(args.out, forms_verdict_record(pred, args.check, storage.read_bytes(args.check), args.fit,
                                                      storage.read_bytes(args.fit), rows))
        lines.append(f"wrote {args.out}")
    emit(args, {"prediction": args.check, "measured_fit": args.fit, "verdicts": rows, "out": args.out},
         "\n".join(lines))
    return 0


def _predict(args: argparse.Namespace) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits import predict as P

    if args.forms is not None:
        return _predict_forms(args)
    if args.fit is None:
        raise UserError("predict needs --fit (or --forms COMPARISON)")
    fit = load_fit_file(args.fit, f"--fit {args.fit}")
    if args.check is not None:
        if _is_forms_prediction(args.check):
            return _check_forms(args, fit)
        if args.pairs:
            raise UserError("predict --check takes --fit (the measured fit) and --out (the verdict file), no --pairs")
        return _check(args, fit, P)
    if not args.pairs or not args.out:
        raise UserError("predict needs --pairs and --out (or --check PREDICTION)")
    _check_out_dir(args.out, example="prediction.json")
    pairs = P.parse_pairs(args.pairs)
    raw = storage.read_bytes(args.fit)
    out = P.predict(fit, str(args.fit), raw, pairs)
    # A pre-registered prediction is never replaced in place: write it once.
    store, name = storage.store_of_file(args.out)
    if not store.write(name, storage.json_text(out), exclusive=True):
        raise UserError(f"{args.out} exists: a prediction is written once (choose another --out)")
    lw = out["fit"]["law"]
    text = form_of_formula(lw["form"], str(args.fit)).describe(f"{lw['a']:.4f}", f"{lw['b']:.4f}")
    lines = [f"law {args.fit} (sha256 {out['fit']['sha256'][:12]}): {text}, depth assigned {out['fit']['assign']}, "
             "fitted on " + ", ".join(f"({a},{b})" for a, b in out["fit"]["pairs_fitted"])]
    rows = [[f"({p['pair'][0]},{p['pair'][1]})", f"{p['L']:.2f}{'*' if p['extrapolated'] else ''}", _w(p["d_x"]),
             format_count(p["n_star"]),
             _ci_text(p, "ci95", format_count), _ci_text(p, "ci95_bootstrap", format_count),
             ", ".join(f"{c} {format_count(v)}" for c, v in p["n_star_by_convention"].items())] for p in out["predictions"]]
    lines.append(_table(["pair", "L", "d_x", "N*", "95% CI (cov)", "95% CI (bootstrap cov)", "N* by convention"], rows))
    if any(p["extrapolated"] for p in out["predictions"]) and out["fit"]["depth_range"]:
        lo, hi = out["fit"]["depth_range"]
        lines.append(f"* extrapolated: depth outside the fit's data range {lo:.3g}-{hi:.3g} layers")
    lines.append(f"wrote {args.out} (git {out['git_rev'] or 'unknown'})")
    emit(args, {**out, "out": str(args.out)}, "\n".join(lines))
    return 0


def _check(args: argparse.Namespace, fit: dict, P) -> int:
    """``predict --check``: the verdict of a prediction against a measured fit, written as a
    verdict file (fits.validation) with ``--out``, where ``query --fit`` finds it."""
    from depthwidth.fits.validation import verdict_record

    if args.out:
        _check_out_dir(args.out, example="verdict.json")
    pred = P.read_prediction(args.check)
    rows = P.verdict(pred, fit, f"--fit {args.fit}")
    if all(v.get("reason") == P.NO_SUCH_PAIR for v in rows):  # nothing judged: the wrong file, most likely
        pairs = ", ".join(f"({a},{b})" for a, b in (v["pair"] for v in rows))
        raise UserError(f"--fit {args.fit} holds none of the predicted pairs {pairs}: give the fit of "
                        "their records (e.g. results/predict-36/fit.json)")
    diff = P.protocol_differences(pred, fit)
    lines = format_verdicts(rows, args.check, args.fit, diff)
    if args.out:  # a verdict is derived, so rewriting it with the same inputs gives the same bytes
        _write_verdict(args.out, verdict_record(pred, args.check, storage.read_bytes(args.check), args.fit,
                                                storage.read_bytes(args.fit), rows, diff))
        lines.append(f"wrote {args.out}")
    emit(args, {"prediction": args.check, "measured_fit": args.fit, "verdicts": rows,
                "protocol_differences": diff, "out": args.out}, "\n".join(lines))
    return 0


def _write_verdict(out: str, doc: dict[str, Any]) -> None:
    """Write a verdict file (one-form or forms): derived, so the same inputs rewrite the same bytes."""
    store, name = storage.store_of_file(out)
    store.write(name, storage.json_text(doc))


def format_verdicts(rows: list[dict[str, Any]], pred_path: str, fit_path: str,
                    differences: list[str] | None = None) -> list[str]:
    """Text lines of :func:`depthwidth.fits.predict.verdict`'s rows, and of
    :func:`~depthwidth.fits.predict.protocol_differences` (``differences``)."""
    lines = [f"prediction {pred_path} vs measured fit {fit_path}:"]
    if differences is None:
        lines.append("  note: the fit that made the prediction is not at its recorded path (or has changed), "
                     "so this fit's options are not checked against it")
    elif differences:
        lines.append(f"  note: not the registered protocol: {'; '.join(differences)}")
    for v in rows:
        pair = f"({v['pair'][0]},{v['pair'][1]})"
        pred = f"predicted {format_count(v['predicted_n_star'])} {_ci_text(v, 'predicted_ci95', format_count)}"
        if v["status"] != "resolved":
            lines.append(f"  {pair}: not resolved: {v['reason']}; {pred}")
            continue
        inside = {True: "inside the predicted 95% interval", False: "outside the predicted 95% interval",
                  None: "the prediction has no interval"}[v["inside_predicted_ci95"]]
        z = (f"z = {v['z']:+.2f} (combined sigma)" if v["z"] is not None
             else "no z (the prediction has no sigma)")
        ratio = f"x{v['ratio']:.2f}" if v["ratio"] < 1e4 else f"x{v['ratio']:.3g}"
        lines.append(f"  {pair}: measured {format_count(v['measured_n_star'])} "
                     f"{_ci_text(v, 'measured_ci95', format_count)}, {pred}: {ratio}, {inside}; {z}")
        if v.get("non_normal") and v.get("z_ci95") is not None and v["sigma_ln_measured_ci95"] > v["sigma_ln_measured"]:
            lines.append(f"    caution: the measured bootstrap is far from normal: the arm of its 95% interval "
                         f"towards the prediction implies sigma {v['sigma_ln_measured_ci95']:.3f} of ln N*, its "
                         f"16-84% range {v['sigma_ln_measured']:.3f}; with the arm's sigma z = {v['z_ci95']:+.2f}")
    return lines


# ---------------------------------------------------------------- fit


def _fit(args: argparse.Namespace) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits.lawfit import build_fit, stored_fit

    # pandas: ~0.5 s at import; query and --help must not pay it
    from depthwidth.fits.table import load_table

    options = FitOptions(pairs=args.pairs, assign=args.assign,
                         bootstrap=parse_bootstrap(args.bootstrap),
                         resample=args.resample, seed=parse_int(args.seed, name="--seed", minimum=0))
    for flag, given in (("--cells-of", args.cells_of), ("--seeds", args.seeds), ("--tune-lr", args.tune_lr),
                        ("--also", args.also)):
        if given is not None and not args.out:
            raise UserError(f"{flag} needs --out: the default RESULTS/fit.json is the fit of all of RESULTS's records")
    if args.out:  # also the directory of --estimators' table, written beside it (estimators_path)
        _check_out_dir(args.out)
    seeds = parse_int_list(args.seeds, name="--seeds", minimum=0) if args.seeds is not None else None
    if args.estimators and (args.curve, args.crossing) != ("pchip", "last"):
        raise UserError("--estimators compares other curves and crossings with the default fit: drop --curve/--crossing")
    form = form_named(args.law_form)
    pred = None
    if args.prediction is not None:
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        from depthwidth.fits.predict import read_prediction

        pred = read_prediction(args.prediction)  # a bad file fails before the fit's work
    table = load_table(args.results, cells_of=args.cells_of, seeds=seeds, tune_lr=args.tune_lr, also=args.also,
                       reruns=args.reruns)
    fit = build_fit(table, **options.kwargs(), curve=args.curve, crossing=args.crossing, law_form=form.key,
                    correlation=args.compare_forms)
    out = args.out or f"{str(args.results).rstrip('/')}/fit.json"
    extra_text, extra = [], {}
    if args.estimators and not fit.get("law"):
        extra_text.append("estimators: the fit has no law, so there is no slope to compare (no table written)")
    elif args.estimators:
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        from depthwidth.fits.estimators import estimator_table, estimators_path

        est = estimator_table(lambda s: table if s is None else load_table(
            args.results, cells_of=args.cells_of, seeds=s, tune_lr=args.tune_lr, also=args.also,
            reruns=args.reruns), options, fit)
        est_out = estimators_path(str(out))
        storage.write_json_if_changed(est_out, est)
        extra["estimators"], extra["estimators_out"] = est, est_out
        extra_text += format_estimators(est) + [f"wrote {est_out}"]
    if args.rerun_noise:
        extra_text += _rerun_noise(table, fit, str(out), extra)
    if args.point_estimators:
        # numpy/scipy: ~0.9 s at import; only fitting pays it
        from depthwidth.fits.point_estimators import point_estimators

        pe = point_estimators(table, pairs=options.pairs, bootstrap=options.bootstrap, seed=options.seed)
        pe_out = (str(out)[:-5] if str(out).endswith(".json") else str(out)) + ".points.json"
        storage.write_json_if_changed(pe_out, pe)
        extra["point_estimators"], extra["point_estimators_out"] = pe, pe_out
        extra_text += format_point_estimators(pe) + [f"wrote {pe_out}"]
    if args.compare_forms:
        # numpy/scipy: ~0.9 s at import; only fitting pays it
        from depthwidth.fits.compare import compare_forms, forms_path

        cmp = compare_forms(stored_fit(fit, out), str(out))
        cmp_out = forms_path(str(out))
        storage.write_json_if_changed(cmp_out, cmp)
        extra["forms"], extra["forms_out"] = cmp, cmp_out
        extra_text += format_forms(cmp) + [f"wrote {cmp_out}"]
    if pred is not None:
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        from depthwidth.fits.predict import protocol_differences, verdict

        extra["verdicts"] = verdict(pred, fit)
        extra["protocol_differences"] = protocol_differences(pred, fit)
        extra_text += format_verdicts(extra["verdicts"], args.prediction, str(out), extra["protocol_differences"])
    if changed := _replaced_options(out, fit):
        extra_text.append(f"note: {out} held a fit with other options ({changed}); it is replaced")
        extra["replaced_options"] = changed
    storage.write_json_if_changed(out, stored_fit(fit, out))  # the same fit up to the last bits: its bytes kept
    if fit.get("law"):
        extra["validation"] = _fit_validation(str(out), str(args.results))
        extra_text.append(extra["validation"]["text"])
    # "insufficient" (fewer than 2 fitted points) is a result, stated in the output: exit 0.
    emit(args, {**fit, "out": str(out), **extra}, "\n".join([_fit_text(fit, out), *extra_text]))
    return 0


def _same_fit(a: bytes, b: bytes) -> bool:
    """Whether two fit files hold the same fit, up to where they were written (the table's paths
    are stored relative to each file's folder)."""
    try:
        x, y = json.loads(a), json.loads(b)
        for d in (x, y):
            d["table"] = {k: v for k, v in (d.get("table") or {}).items()
                          if k not in ("results", "also", "cells_of", "lr_tuned")}
        return storage.same_within(x, y, storage.SAME_RTOL)  # a refit differs in the last bits
    except (ValueError, AttributeError, TypeError):
        return False


def _fit_validation(out: str, results: str) -> dict[str, Any]:
    """The written fit's out-of-sample record (fits.validation: pre-registered predictions made
    from these bytes and their verdicts), as ``query --fit`` prints it. Written outside a results
    tree (e.g. --out /tmp/fit.json) but the same fit as the results directory's own fit.json
    (:func:`_same_fit`), it is that fit, and its record is read there. A record that no longer matches (the fit rewritten
    with other options) is said in the line, not raised: the fit is written already."""
    from depthwidth.fits.validation import law_validation, predictions_dir

    spec = out
    own = f"{results.rstrip('/')}/fit.json"
    if not storage.is_url(out) and not predictions_dir(Path(out)).is_dir() and own != out \
            and Path(own).is_file() and _same_fit(Path(own).read_bytes(), Path(out).read_bytes()):
        spec = own
    try:
        return law_validation(spec, load_law(spec))
    except UserError as e:
        return {"status": "unreadable", "text": f"validation: {e}"}


def _replaced_options(out: str, fit: dict[str, Any]) -> str | None:
    """How the fit file already at ``out`` differs in its options from ``fit`` ("crossing last ->
    first"); None when there is none, it cannot be read, or the options agree. A committed fit
    (e.g. the one a verdict was made from) is then not overwritten by an exploration unnoticed."""
    try:
        stored = json.loads(storage.read_bytes(out))
        old = {**stored["options"], "seeds": (stored.get("table") or {}).get("seeds")}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return None
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits.predict import OPTION_DEFAULTS

    new = {**(fit.get("options") or {}), "seeds": (fit.get("table") or {}).get("seeds")}
    old, new = ({k: ("all" if d[k] is None else ",".join(map(str, d[k]))) if k == "seeds" else d[k] for k in d}
                for d in (old, new))
    old, new = ({k: d.get(k, OPTION_DEFAULTS.get(k, "-")) for k in sorted(set(old) | set(new))} for d in (old, new))
    return ", ".join(f"{k} {old[k]} -> {new[k]}" for k in old if old[k] != new[k]) or None


def _rerun_noise(table, fit: dict[str, Any], out: str, extra: dict[str, Any]) -> list[str]:
    """fit --rerun-noise: fits.reruns on the table's rerun pairs, written to X.reruns.json."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits.reruns import rerun_effect, rerun_spread

    spread = rerun_spread(table.reruns)
    if spread is None:
        raise UserError("--rerun-noise needs runs trained twice: read directories that share runs with --reruns first")
    o = fit["options"]
    effect = rerun_effect(table, spread["sigma_rerun"], pairs=o["pairs"], seed=o["seed"])
    sig = {(p["L_s"], p["L_d"]): p.get("sigma_ln_N_star") for k in ("points", "not_fitted") for p in fit.get(k) or []}
    for e in effect:
        e["bootstrap_sigma_ln_n_star"] = sig.get(tuple(e["pair"]))
    path = (out[:-5] if out.endswith(".json") else out) + ".reruns.json"
    storage.write_json_if_changed(path, {"spread": spread, "reruns": table.reruns, "effect": effect})
    extra["rerun_noise"] = {"spread": spread, "effect": effect, "out": path}
    lines = [f"reruns: {spread['n']} runs trained twice ({'; '.join(spread['cpu_pairs'])}): loss difference mean "
             f"{spread['mean_diff']:+.4f}, SD {spread['sd_diff']:.4f}, max |{spread['max_abs_diff']:.4f}| nats; "
             f"one training's rerun noise sigma_rerun = {spread['sigma_rerun']:.4f}"]
    for e in effect:
        b = e["bootstrap_sigma_ln_n_star"]
        lines.append(f"  ({e['pair'][0]},{e['pair'][1]}): every run jittered by sigma_rerun moves ln N* by SD "
                     + ("-" if e["sd_ln_n_star"] is None else f"{e['sd_ln_n_star']:.3f}")
                     + f" (crosses in {e['share_crossing']:.1%} of {e['draws']} draws); bootstrap sigma "
                     + ("-" if b is None else f"{b:.3f}"))
    return lines + [f"wrote {path}"]


def format_point_estimators(pe: dict[str, Any]) -> list[str]:
    """Text of :func:`depthwidth.fits.point_estimators.point_estimators`: one row per pair and estimator."""
    rows = []
    for r in pe["rows"]:
        ci = r["ci95_of_crossing_replicates"]
        ex = r["share_exact_seeds"]
        rows.append([f"({r['pair'][0]},{r['pair'][1]})", r["estimator"],
                     format_count(r["N_star"]) if r["N_star"] else r["status"],
                     f"[{format_count(ci[0])}, {format_count(ci[1])}]" if ci else "-",
                     f"{r['share']:.3f} ± {r['share_mc_error']:.3f}", "-" if ex is None else f"{ex:.4f}",
                     " ".join(format_count(v) if v else "-" for v in r["per_seed"].values())])
    return [f"N* per estimator (fits.point_estimators; {pe['bootstrap']} paired replicates, exact share: every "
            f"draw of seeds {','.join(map(str, pe['seeds']))} enumerated, without the evaluation-set term):",
            _table(["pair", "estimator", "N*", "95% CI (crossing replicates)", "share ± MC error", "exact share",
                    "N* per seed " + ",".join(map(str, pe["seeds"]))], rows)]


def format_forms(cmp: dict[str, Any]) -> list[str]:
    """Text of :func:`depthwidth.fits.compare.compare_forms`: the points, one row per form, the
    leave-one-pair-out z-scores and the verdict."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits.transitions import format_fraction

    def num(v, f="{:.2f}"):
        return "-" if v is None else f.format(v)

    pts = cmp["points"]
    lines = ["law forms on " + ", ".join(
        f"({p['pair'][0]},{p['pair'][1]}) d_x {p['d_x']:.1f} ± {p['sigma_ln_d_x']:.3f}"
        f" [{format_fraction(p['bootstrap_fraction'])}{'' if p['fitted_by_law'] else ', not in the law'}]"
        for p in pts) + " (ln d_x ± sigma [crossing share]; joint bootstrap covariance, fits.compare):"]
    head = ["form", "law", "chi2", "dof", "p", "AIC", "dAIC", "weight", "BIC", "held-out loglik",
            *(f"z({p['pair'][0]},{p['pair'][1]})" for p in pts), "verdict"]
    rows = []
    for r in cmp["forms"]:
        verdict = ("excluded: " + r["excluded_because"]) if r["excluded"] else (
            "preferred" if cmp["preferred"] == r["key"] else "survives")
        rows.append([r["key"], r["law"], f"{r['chi2']:.2f}", str(r["dof"]), num(r["p_value"], "{:.3g}"),
                     f"{r['aic']:.2f}", f"{r['delta_aic']:.2f}", f"{r['aic_weight']:.3f}", f"{r['bic']:.2f}",
                     num(r["heldout_loglik"]), *(num(x["z"], "{:+.2f}") for x in r["loo"]), verdict])
    lines.append(_table(head, rows))
    lines.append(f"rule: {cmp['rule']}")
    lines.append("surviving: " + (", ".join(cmp["surviving"]) or "none") + "; preferred: "
                 + (cmp["preferred"] or "none (the surviving forms answer side by side)"))
    return lines


def format_estimators(est: dict[str, Any]) -> list[str]:
    """Text of :func:`depthwidth.fits.estimators.estimator_table`: one row per estimator."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits.transitions import format_fraction

    rows = []
    for r in est["rows"]:
        ci = r["b_ci95"]
        yes = {True: "contains", False: "excludes", None: "-"}
        pts = " ".join(f"({p['pair'][0]},{p['pair'][1]}):{format_fraction(p['fraction'])}" for p in r["points"])
        rows.append([r["estimator"], "-" if r["b"] is None else f"{r['b']:.4f}",
                     "-" if ci is None else f"[{ci[0]:.4f}, {ci[1]:.4f}]", yes[r["contains_paper"]],
                     yes[r["contains_ln3"]], pts or "-", r["note"]])
    lines = ["b under every estimator (fits.estimators; crossing fraction of each pair):",
             _table(["estimator", "b", "95% CI of b", f"b={est['paper_b']}", "ln 3", "pairs", "note"], rows)]
    if est.get("form"):
        return lines + [f"claims about {est['paper_b']} and ln 3: none, they are slopes of ln d_x = a + b*L, "
                        f"not of the fit's {est['form']}"]
    for key, what in (("excludes_paper", f"b's interval excludes the paper's {est['paper_b']}"),
                      ("excludes_ln3", "b's interval excludes ln 3")):
        c = est["claims"][key]
        lines.append(f"claim '{what}': " + ("holds in every row" if c["holds_in_every_row"] else
                                             f"fails in {', '.join(c['fails_in']) or 'no row with an interval'}"))
    return lines


def _lrscan(args: argparse.Namespace) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits.lrscan import load_scan

    c, power = _positive(args.rule_c, "--rule-c"), _positive(args.rule_power, "--rule-power")
    seeds = parse_int_list(args.seeds, name="--seeds", minimum=0, unique=True) if args.seeds is not None else None
    excluded: list[str] = []
    rows = load_scan(args.results, c, power, seeds=seeds, average_seeds=args.average_seeds, excluded=excluded)
    lines = [f"excluded {e}" for e in excluded]
    lines.append(f"{'L':>2} {'d':>4} {'N':>6} {'seed':>4}  test loss at lr ...{'':<28} {'best lr':>8} "
                 f"{'rule lr':>8} {'regret':>7}")
    for r in rows:
        pts = "  ".join(f"{lr:.3g}:{y:.4f}" for lr, y in zip(r["lrs"], r["losses"]))
        best = r["lr_opt"] if r["lr_opt"] is not None else r["best_scanned"]["lr"]
        # round() then +0.0: a regret of -3e-8 (a line through the rule's own point) prints +0.0000
        regret = f"{round(r['regret'], 4) + 0.0:+.4f}" if r["regret"] is not None else "outside"
        seed = r["seed"] if r["seed"] is not None else "mean"
        lines.append(f"{r['n_layer']:>2} {r['d_model']:>4} {format_count(r['N']):>6} {seed:>4}  {pts:<46} "
                     f"{best:>8.3g}{'' if r['lr_opt'] is not None else '*'} {r['rule_lr']:>8.3g} {regret:>7}")
    lines.append(f"rule lr = {c:g} / d_model^{power:g}; best lr: the parabola's vertex in ln lr, * = the best "
                 "scanned lr (vertex outside the scan); regret: loss at the rule's lr minus the best (nats/token)")
    if args.average_seeds:
        lines.append("mean: over seeds " + "; ".join(f"L{r['n_layer']} d{r['d_model']}: {','.join(map(str, r['seeds']))}"
                                                     for r in rows) + " (lrs without all of them left out)")
    emit(args, {"rule": {"c": c, "power": power}, "shapes": rows, "excluded": excluded}, "\n".join(lines))
    return 0


def _fit_text(fit: dict[str, Any], out) -> str:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.fits.transitions import format_fraction, format_interval

    t = fit["table"]
    lines = [f"results {t['results']}" + (f" with {', '.join(t['also'])}" if t.get("also") else "")
             + f": {t['n_records']} records, {t['n_used']} used in {t['n_cells']} "
             f"(depth, width) cells, {len(t['excluded'])} excluded, {len(t['unfinished'])} unfinished"
             + (f" (only the cells that {t['cells_of']} also has)" if t.get("cells_of") else "")
             + (f" (only seeds {','.join(map(str, t['seeds']))})" if t.get("seeds") is not None else "")]
    for e in t["excluded"]:
        lines.append(f"  excluded {e['run_id']}: {e['reason']}")
    for u in t["unfinished"]:
        lines.append(f"  unfinished {u} (no record.json)")
    if t.get("lr_tuned"):
        tl = t["lr_tuned"]
        lines.append(f"lr per cell: lowest mean validation loss, read with {', '.join(tl['dirs'])} "
                     f"({tl['n_read']} training records read; the {tl['n_other_lrs']} at the other lrs are set aside):")
        lines += [f"  L{c['n_layer']} d{c['d_model']}: lr {c['lr']:g} of "
                  + ", ".join(f"{lr}" + (f" ({v:.4f})" if v is not None else " (no finished run)")
                              for lr, v in c["val_loss_by_lr"].items())
                  + f", seeds {','.join(map(str, c['seeds_compared']))}"
                  + (f" ({', '.join(f'{x:g}' for x in c['lrs_left_out'])}: fewer seeds, left out)"
                     if c.get("lrs_left_out") else "") for c in t["lr_tuned"]["cells"]]
    o = fit["options"]
    lines.append(f"transition points ({o['pairs']} pairs, curve {o['curve']}, depth assigned: {o['assign']}, "
                 f"bootstrap {o['bootstrap']}, residuals {o['resample']}):")
    rows = []
    for p in sorted(fit["points"] + fit.get("not_fitted", []) + fit["no_crossing"], key=lambda p: (p["L_s"], p["L_d"])):
        ci = p["N_star_ci95"]
        status = p["status"] + ("" if p.get("fitted", True) or p["status"] not in ("crossing", "multiple")
                                else " (not fitted)")
        rows.append([f"({p['L_s']},{p['L_d']})", status, format_count(p["N_star"]),
                     format_interval(ci, p.get("ci95_open"), p.get("N_range")),
                     f"{p['L']:.2f}", f"{p['d_x']:.1f}" if p["d_x"] else "-",
                     f"{p['sigma_ln_d_x']:.3f}" if p["sigma_ln_d_x"] else "-",
                     format_fraction(p["bootstrap_fraction"])])
    lines.append(_table(["pair", "status", "N*", "95% CI N*", "L", "d_x", "sigma ln d_x", "boot cross"], rows))
    law = fit["law"]
    if law:
        ci = law["ci95"]
        form = form_of_formula(law["form"], str(out))
        lines.append(f"law: {form.describe('a', 'b')} with a = {law['a']:.4f} ± {law['stderr']['a']:.4f} "
                     f"[{ci['a'][0]:.4f}, {ci['a'][1]:.4f}], b = {law['b']:.4f} ± {law['stderr']['b']:.4f} "
                     f"[{ci['b'][0]:.4f}, {ci['b'][1]:.4f}] (95%)")
        if law["dof"] > 0:
            lines.append(f"     {law['n_points']} points, dof {law['dof']}, chi2_red {law['chi2_red']:.3f}, "
                         f"R^2 {law['r2']:.4f} (weighted), {law['r2_unweighted']:.4f} (unweighted)")
        else:
            lines.append("     2 points: the exact line through them (dof 0, no chi2 or R^2)")
        v = law.get("b_vs")
        if v:
            lines.append(f"     b's 95% interval (cov) [{ci['b'][0]:.4f}, {ci['b'][1]:.4f}] "
                         f"{'contains' if v['paper_inside'] else 'excludes'} the paper's {v['paper']} and "
                         f"{'contains' if v['theory_inside'] else 'excludes'} the theory's ln 3 = {v['theory_ln3']:.4f}")
            lines += _other_b_intervals(law)
    else:
        lines.append(f"law: none (status {fit['status']}: fewer than 2 transition points cross in >= "
                     f"{o.get('min_fraction', 0.95):.0%} of bootstrap replicates)")
        if len(fit["points"]) + len(fit.get("no_crossing", [])) + len(fit.get("not_fitted", [])) == 1:
            lines.append("     (one depth pair: this fit measures one transition point, e.g. to check a "
                         "prediction with `predict --check`; a law needs two or more pairs)")
    by_assign = fit.get("by_assign") or {}
    for conv, lw in (by_assign.items() if any(by_assign.values()) else ()):  # all "no law": said above
        lines.append(f"  depth assigned {conv:<7}: " + (f"a = {lw['a']:.4f}, b = {lw['b']:.4f} "
                     f"[{lw['ci95']['b'][0]:.4f}, {lw['ci95']['b'][1]:.4f}]" if lw else "no law"))
    for w in fit["warnings"]:
        lines.append(f"warning: {w}")
    lines.append(f"wrote {out}")
    return "\n".join(lines)
