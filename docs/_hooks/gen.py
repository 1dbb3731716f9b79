"""MkDocs hook: the parts of the documentation that are generated, never typed.

A page asks for generated text with a marker on a line of its own::

    <!-- gen: cli -->                           the CLI reference, from depthwidth.cli.build_parser()
    <!-- gen: layout -->                        every module of the package with its docstring's first line
    <!-- gen: include PATH [shift=K] -->        a repository file (e.g. results/cpu/summary.md), headings
                                                shifted K levels down (default 1), its relative images re-pointed
    <!-- gen: cells RESULTS -->                 mean test loss ± seed std per cell (fits.table.load_table)
    <!-- gen: transitions FIT -->               the transition points of a fit.json
    <!-- gen: law FIT -->                       the fitted law of a fit.json under every depth convention
    <!-- gen: predictions FILE -->              the pre-registered transitions of a prediction file
    <!-- gen: estimators FILE -->               b under every estimator (fit --estimators' JSON)
    <!-- gen: verdict PRED PRESET RESULTS -->   measured vs predicted for RESULTS/fit.json (or the runs done)
    <!-- gen: progress PRESET RESULTS -->       how many of a preset's grid and refinement runs have records
    <!-- gen: forms FILE -->                    the law forms judged side by side (fit --compare-forms' JSON)
    <!-- gen: forms-prediction FILE -->         a forms prediction (predict --forms): every form's N*, separations
    <!-- gen: point-estimators FILE -->         N* per pair under every estimator (fit --point-estimators' JSON)
    <!-- gen: forms-verdict VERDICT PRESET RESULTS -->  the committed forms verdict file (or the runs done)

Figures under ``results/*/figures/`` are served at ``assets/results/<dir>/figures/<name>`` (added
to the site by :func:`on_files`), so a page links them as e.g.
``../assets/results/law-long/figures/fig2_width_vs_depth.png`` and ``mkdocs build --strict`` fails
on a figure that is not in the repository. The same functions run in tests/test_docs.py without
MkDocs installed.
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import re
from contextlib import redirect_stdout
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- gen: (\w[\w-]*)\s*(.*?)\s*-->$", re.M)
LEVINE_A, LEVINE_B = 5.039, 0.0555  # Levine et al. 2020 (v3), the published fit ln d_x = a + b·L


def fmt_count(x: float) -> str:
    from depthwidth.units import format_count

    return format_count(x)


# --- the CLI reference -------------------------------------------------------------------------

def _subparsers(parser):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _walk(parser, name: str):
    yield name, parser
    sub = _subparsers(parser)
    if sub is not None:
        for child, child_parser in sub.choices.items():
            yield from _walk(child_parser, f"{name} {child}")


def cli_reference() -> str:
    """Every command's ``--help``, in the parser's order, at a fixed width."""
    from depthwidth.cli import build_parser

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "88"
    try:
        out = ["Generated at build time from `depthwidth.cli.build_parser()` (the parser the CLI runs): "
               "every command's `--help`, so this page cannot drift from the code.\n"]
        for name, parser in _walk(build_parser(), "depthwidth"):
            buf = io.StringIO()
            with redirect_stdout(buf):
                parser.print_help()
            level = "##" if name.count(" ") <= 1 else "###"
            out.append(f"{level} `{name}`\n\n```text\n{buf.getvalue().rstrip()}\n```\n")
        return "\n".join(out)
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


# --- the layout ---------------------------------------------------------------------------------

def modules() -> list[tuple[str, str]]:
    """(module path, first line of its docstring) for every .py file of the package."""
    rows = []
    for path in sorted((REPO / "depthwidth").rglob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        first = " ".join(doc.strip().split("\n\n")[0].split())
        rows.append((str(path.relative_to(REPO)), first))
    return rows


def layout() -> str:
    lines = ["| module | what it holds (its docstring's first paragraph) |", "|---|---|"]
    for path, doc in modules():
        cell = doc.replace("|", "\\|")
        lines.append(f"| `{path}` | {cell} |")
    return "\n".join(lines)


# --- stored results -----------------------------------------------------------------------------

def include(arg: str) -> str:
    path, _, shift = arg.partition(" shift=")
    src = REPO / path
    text = src.read_text()
    text = re.sub(r"^(#+) ", lambda m: "#" * (len(m.group(1)) + int(shift or 1)) + " ", text, flags=re.M)
    base = src.parent.relative_to(REPO)

    def image(m: re.Match) -> str:
        target = m.group(2)
        if re.match(r"[a-z]+://", target) or target.startswith("/"):
            return m.group(0)
        return f"![{m.group(1)}](../assets/{(base / target).as_posix()})"

    return re.sub(r"!\[([^\]]*)\]\(([^)]+)\)", image, text)


def cells(results: str) -> str:
    """Mean test loss ± seed std per (N, L) cell; rows group cells of nearly equal N, bold = lowest."""
    from depthwidth.fits.table import load_table

    c = load_table(REPO / results).cells.sort_values("N")
    depths = sorted(int(L) for L in c["n_layer"].unique())
    rows: list[dict[int, tuple]] = []
    lows: list[float] = []
    for r in c.itertuples():
        if not rows or r.N > 1.25 * lows[-1] or int(r.n_layer) in rows[-1]:
            rows.append({})
            lows.append(r.N)
        rows[-1][int(r.n_layer)] = (r.mean, r.std, int(r.d_model), int(r.n_seeds))
    out = ["| N (Kaplan) | " + " | ".join(f"L = {L}" for L in depths) + " |",
           "|---" * (len(depths) + 1) + "|"]
    for low, row in zip(lows, rows):
        best = min(v[0] for v in row.values())
        cols = []
        for L in depths:
            if L not in row:
                cols.append("–")
                continue
            mean, std, d, n = row[L]
            s = f"{mean:.3f} ± {std:.3f}" if n > 1 else f"{mean:.3f} (1 seed)"
            cols.append(f"**{s}** (d{d})" if mean == best else f"{s} (d{d})")
        out.append(f"| ~{fmt_count(low)} | " + " | ".join(cols) + " |")
    return "\n".join(out)


def _levine_n(L: float) -> tuple[float, float]:
    d = math.exp(LEVINE_A + LEVINE_B * L)
    return 12 * L * d * d, d


def transitions(fit: str) -> str:
    f = json.loads((REPO / fit).read_text())
    out = ["| pair | N* [95 %] | crosses in | d_x at L (σ of ln d_x) | Levine et al.'s law at that L |",
           "|---|---|---|---|---|"]
    for p in f["points"] + f.get("no_crossing", []):
        pair = f"({p['L_s']}, {p['L_d']})"
        if p.get("status") != "crossing":
            lo, hi = p["N_range"]
            nl, dl = _levine_n(p["L"])
            out.append(f"| {pair} | none in {fmt_count(lo)}–{fmt_count(hi)}: {p.get('meaning', p['status'])} | "
                       f"{100 * p['bootstrap_fraction']:.1f} % | – | {fmt_count(nl)} (d_x {dl:.0f}) |")
            continue
        lo, hi = p["N_star_ci95"]
        nl, dl = _levine_n(p["L"])
        out.append(f"| {pair} | **{fmt_count(p['N_star'])}** [{fmt_count(lo)}, {fmt_count(hi)}] | "
                   f"{100 * p['bootstrap_fraction']:.1f} % | {p['d_x']:.1f} at {p['L']:.2f} "
                   f"({p['sigma_ln_d_x']:.3f}) | {fmt_count(nl)} (d_x {dl:.0f}) |")
    return "\n".join(out)


def law(fit: str) -> str:
    f = json.loads((REPO / fit).read_text())
    if not f.get("law"):
        return f"`{fit}` holds no law (status `{f['status']}`)."
    default = f["options"]["assign"]
    names = {"geom": "√(L_s·L_d) (geometric mean)", "arith": "arithmetic mean", "shallow": "shallow depth",
             "deep": "deep depth"}
    out = ["| depth assigned to a point | a [95 %] | b [95 %] | χ²_red | excludes 0.0555? | excludes ln 3? |",
           "|---|---|---|---|---|---|"]
    for key in ("geom", "arith", "shallow", "deep"):
        fitd = f["law"] if key == default else f["by_assign"].get(key)
        if not fitd:
            continue
        (alo, ahi), (blo, bhi) = fitd["ci95"]["a"], fitd["ci95"]["b"]
        mark = " (default)" if key == default else ""
        out.append(f"| {names[key]}{mark} | {fitd['a']:.3f} [{alo:.3f}, {ahi:.3f}] | "
                   f"{fitd['b']:.3f} [{blo:.3f}, {bhi:.3f}] | {fitd['chi2_red']:.2f} | "
                   f"{'yes' if not fitd['b_vs']['paper_inside'] else 'no'} | "
                   f"{'yes' if not fitd['b_vs']['theory_inside'] else 'no'} |")
    return "\n".join(out)


def predictions(path: str) -> str:
    """The pre-registered transitions of a prediction file (``depthwidth predict``)."""
    f = json.loads((REPO / path).read_text())
    out = [f"From `{f['fit']['path']}` (sha256 `{f['fit']['sha256'][:12]}…`), written {f['created_at'][:10]} "
           f"at revision `{f['git_rev'][:10]}`:", "",
           "| pair | depth L | predicted N* | 95 % (fit covariance) | 95 % (bootstrap covariance) | d_x |",
           "|---|---|---|---|---|---|"]
    for p in f["predictions"]:
        (lo, hi), (blo, bhi) = p["ci95"], p["ci95_bootstrap"]
        out.append(f"| ({p['pair'][0]}, {p['pair'][1]}) | {p['L']:.2f} | **{fmt_count(p['n_star'])}** | "
                   f"[{fmt_count(lo)}, {fmt_count(hi)}] | [{fmt_count(blo)}, {fmt_count(bhi)}] | {p['d_x']:.1f} |")
    return "\n".join(out)


def estimators(path: str) -> str:
    """b's 95 % interval under every estimator (``depthwidth fit --estimators``), and the claims."""
    from depthwidth.fits.transitions import format_fraction

    f = json.loads((REPO / path).read_text())
    yes = {True: "contains", False: "excludes", None: "–"}
    out = [f"| estimator | b | 95 % interval of b | {f['paper_b']} | ln 3 | pairs (share of replicates crossing) |",
           "|---|---|---|---|---|---|"]
    for r in f["rows"]:
        ci = r["b_ci95"]
        pts = ", ".join(f"({p['pair'][0]},{p['pair'][1]}) {format_fraction(p['fraction'])}" for p in r["points"]) or "–"
        if r.get("per_seed"):
            pts = "; ".join(f"seed {s['seed']}: b {s['b']:.3f}" for s in r["per_seed"] if s["b"] is not None)
        b = "–" if r["b"] is None else f"{r['b']:.3f}"
        out.append(f"| {r['estimator']} | {b} | "
                   f"{'–' if ci is None else f'[{ci[0]:.3f}, {ci[1]:.3f}]'} | {yes[r['contains_paper']]} | "
                   f"{yes[r['contains_ln3']]} | {pts} |")
    for key, what in (("excludes_paper", f"the interval excludes {f['paper_b']}"), ("excludes_ln3", "the interval excludes ln 3")):
        c = f["claims"][key]
        out.append("")
        out.append(f"*{what}*: " + ("holds in every row." if c["holds_in_every_row"]
                                    else f"fails in {', '.join(c['fails_in'])}."))
    return "\n".join(out)


def progress(arg: str) -> str:
    """How many of a preset's grid runs have records under RESULTS, and how many other records
    (refinement rounds) are there."""
    from depthwidth.experiments.presets import load_preset

    preset, results = arg.split()
    grid = {r.run_id() for r in load_preset(preset).runs}
    recorded = {p.parent.name for p in (REPO / results / "runs").glob("*/record.json")}
    more = len(recorded - grid)
    return (f"`{preset}`: records for {len(grid & recorded)} of its {len(grid)} grid runs"
            + (f" and {more} refinement run{'s' if more != 1 else ''}" if more else "") + f" in `{results}`")


def verdict(arg: str) -> str:
    """Measured vs predicted (``predict --check``) once ``RESULTS/fit.json`` exists; before that,
    how many of the preset's runs have records."""
    from depthwidth.fits.predict import read_prediction
    from depthwidth.fits.predict import verdict as judge

    pred_path, preset, results = arg.split()
    fit = REPO / results / "fit.json"
    head = progress(f"{preset} {results}")
    if not fit.is_file():
        return head + "; no fit yet, so no verdict."
    # a pair this results directory did not train is not a verdict: only the pairs its fit holds
    rows = [v for v in judge(read_prediction(str(REPO / pred_path)), json.loads(fit.read_text()))
            if not v.get("reason", "").startswith("the measured fit has no such pair")]
    out = [head + ".", "", "| pair | predicted N* [95 %] | measured N* [95 %] | crosses in | ratio | z (combined σ) | z (conservative σ) | verdict |",
           "|---|---|---|---|---|---|---|---|"]
    for v in rows:
        pr = f"{fmt_count(v['predicted_n_star'])} [{fmt_count(v['predicted_ci95'][0])}, {fmt_count(v['predicted_ci95'][1])}]"
        if v["status"] != "resolved":
            out.append(f"| ({v['pair'][0]}, {v['pair'][1]}) | {pr} | – | – | – | – | – | not resolved: {v['reason']} |")
            continue
        mlo, mhi = v["measured_ci95"] or (None, None)
        ms = f"{fmt_count(v['measured_n_star'])} [{fmt_count(mlo) if mlo else '–'}, {fmt_count(mhi) if mhi else '–'}]"
        out.append(f"| ({v['pair'][0]}, {v['pair'][1]}) | {pr} | {ms} | {100 * v['bootstrap_fraction']:.1f} % | "
                   f"×{v['ratio']:.2f} | {v['z']:+.2f} | "
                   + (f"{v['z_ci95']:+.2f}" + (" (bootstrap far from normal)" if v["non_normal"] else "")
                      if v["z_ci95"] is not None else "–") + " | "
                   + f"{'inside' if v['inside_predicted_ci95'] else 'outside'} the predicted interval |")
    return "\n".join(out)


def _num(v, f="{:.2f}") -> str:
    return "–" if v is None else f.format(v)


def forms(path: str) -> str:
    """The law forms judged side by side (``depthwidth fit --compare-forms``)."""
    f = json.loads((REPO / path).read_text())
    pts = f["points"]
    out = ["| pair | L | d_x | σ(ln d_x) | crossing share | in the 95 %-rule law |", "|---|---|---|---|---|---|"]
    out += [f"| ({p['pair'][0]}, {p['pair'][1]}) | {p['L']:.2f} | {p['d_x']:.1f} | {p['sigma_ln_d_x']:.3f} | "
            f"{100 * p['bootstrap_fraction']:.1f} % | {'yes' if p['fitted_by_law'] else 'no'} |" for p in pts]
    zs = " | ".join(f"z ({p['pair'][0]},{p['pair'][1]})" for p in pts)
    out += ["", f"| form | law | χ² (dof) | p | AIC | ΔAIC | Akaike weight | BIC | held-out log-lik | {zs} | verdict |",
            "|---|---|---|---|---|---|---|---|---|" + "---|" * len(pts) + "---|"]
    for r in f["forms"]:
        verdict = ("excluded: " + r["excluded_because"]) if r["excluded"] else (
            "preferred" if f["preferred"] == r["key"] else "survives")
        out.append(f"| {r['key']} | {r['law']} | {r['chi2']:.2f} ({r['dof']}) | {_num(r['p_value'], '{:.3g}')} | "
                   f"{r['aic']:.2f} | {r['delta_aic']:.2f} | {r['aic_weight']:.3f} | {r['bic']:.2f} | "
                   f"{_num(r['heldout_loglik'])} | " + " | ".join(_num(x["z"], "{:+.2f}") for x in r["loo"])
                   + f" | {verdict} |")
    out += ["", f"Rule: {f['rule']}. Surviving: {', '.join(f['surviving']) or 'none'}; preferred: "
            + (f["preferred"] or "none, so the surviving forms answer side by side") + "."]
    return "\n".join(out)


def forms_prediction(path: str) -> str:
    """A forms prediction (``depthwidth predict --forms``): every form's N* and how far apart they are."""
    f = json.loads((REPO / path).read_text())
    c = f["comparison"]
    out = [f"From `{c['path']}` (sha256 `{c['sha256'][:12]}…`), written {f['created_at'][:10]} at revision "
           f"`{(f['git_rev'] or 'unknown')[:10]}`:"]
    sm = f["sigma_meas_expected"]
    for pp in f["predictions"]:
        out += ["", f"| form ({pp['pair'][0]}, {pp['pair'][1]}) at L = {pp['L']:.2f} | predicted N* | 95 % | σ(ln N*) | "
                "Akaike weight | standing |", "|---|---|---|---|---|---|"]
        out += [f"| {x['form']} | **{fmt_count(x['n_star'])}** | [{fmt_count(x['ci95'][0])}, {fmt_count(x['ci95'][1])}] | "
                f"{x['sigma_ln_n_star']:.3f} | {x['aic_weight']:.3f} | "
                + ("survives" if x["survives"] else f"excluded ({x['excluded_because']})") + " |" for x in pp["forms"]]
        out += ["", f"| surviving forms | Δ ln N* | in expected measurement errors ({sm:.3f}) | in combined σ |",
                "|---|---|---|---|"]
        out += [f"| {s['forms'][0]} vs {s['forms'][1]} | {s['delta_ln_n_star']:.3f} | {s['in_sigma_meas']:.2f} | "
                f"{s['in_combined_sigma']:.2f} |" for s in pp["separations"]]
        ranges = "; ".join(f"**{r['form']}** " + (f"below {fmt_count(r['to'])}" if r["from"] is None else
                                                 f"above {fmt_count(r['from'])}" if r["to"] is None else
                                                 f"from {fmt_count(r['from'])} to {fmt_count(r['to'])}")
                           for r in pp["favoured_ranges"])
        out += ["", f"A measured N* (with error {sm:.3f}) favours: {ranges}."]
    return "\n".join(out)


def point_estimators(path: str) -> str:
    """N* per pair under every estimator (``depthwidth fit --point-estimators``)."""
    f = json.loads((REPO / path).read_text())
    seeds = ", ".join(map(str, f["seeds"]))
    out = [f"| pair | estimator | N* | 95 % (crossing replicates) | share ± MC error | exact share | N* per seed ({seeds}) |",
           "|---|---|---|---|---|---|---|"]
    for r in f["rows"]:
        ci = r["ci95_of_crossing_replicates"]
        out.append(f"| ({r['pair'][0]}, {r['pair'][1]}) | {r['estimator']} | "
                   + (fmt_count(r["N_star"]) if r["N_star"] else r["status"]) + " | "
                   + (f"[{fmt_count(ci[0])}, {fmt_count(ci[1])}]" if ci else "–") + f" | {r['share']:.3f} ± "
                   f"{r['share_mc_error']:.3f} | {_num(r['share_exact_seeds'], '{:.4f}')} | "
                   + ", ".join(fmt_count(v) if v else "–" for v in r["per_seed"].values()) + " |")
    return "\n".join(out)


def forms_verdict(arg: str) -> str:
    """The committed forms verdict file VERDICT (written by ``predict --check FORMS_PREDICTION
    --fit RESULTS/fit.json --out VERDICT``), read as it is, not recomputed; before it exists, how
    many of the preset's runs have records. A verdict whose prediction or measured fit changed
    since it was written fails the build (UserError), as ``query`` refuses it."""
    from depthwidth.fits.forms_record import check_forms_verdict
    from depthwidth.fits.validation import check_input

    vpath, preset, results = arg.split()
    head = progress(f"{preset} {results}")
    if not (REPO / vpath).is_file():
        fit = f"{results}/fit.json"
        return head + ("; no verdict file yet (`predict --check ... --fit " + fit + f" --out {vpath}`)."
                       if (REPO / fit).is_file() else "; no fit yet, so no verdict.")
    v = check_forms_verdict(json.loads((REPO / vpath).read_text()), vpath)
    redo = f"rerun depthwidth predict --check {v['prediction']['path']} --fit {v['measured_fit']['path']} --out {vpath}"
    for what in ("prediction", "measured_fit"):
        check_input(vpath, what.replace("_", " "), v[what], REPO, redo)
    out = [head + f"; verdict file `{vpath}` (prediction `{v['prediction']['path']}`, measured fit "
           f"`{v['measured_fit']['path']}`)."]
    for r in v["verdicts"]:
        m = r.get("measured") or {}
        out += ["", f"({r['pair'][0]}, {r['pair'][1]}): **{r['outcome']}**"
                + (f", measured N* {fmt_count(m['N_star'])}" if m.get("N_star") else "")
                + (f", favoured: **{r['favoured']}**" if r.get("favoured") else "")]
        if r["forms"]:
            out += ["", "| form | z or P(outcome) | status | updated weight |", "|---|---|---|---|"]
            out += [f"| {x['form']} | " + (f"{x['z']:+.2f}" if "z" in x else f"{x['probability_of_outcome']:.3g}")
                    + f" | {x['status']} | {_num(x.get('updated_weight'), '{:.3f}')} |" for x in r["forms"]]
    return "\n".join(out)


GENERATORS = {
    "forms": forms,
    "forms-prediction": forms_prediction,
    "point-estimators": point_estimators,
    "forms-verdict": forms_verdict,
    "predictions": predictions,
    "estimators": estimators,
    "verdict": verdict,
    "progress": progress,
    "cli": lambda arg: cli_reference(),
    "layout": lambda arg: layout(),
    "include": include,
    "cells": cells,
    "transitions": transitions,
    "law": law,
}


def expand(markdown: str) -> str:
    """Replace every marker by its generated text (an unknown marker is an error)."""
    def one(m: re.Match) -> str:
        name, arg = m.group(1), m.group(2)
        if name not in GENERATORS:
            raise ValueError(f"unknown docs marker: gen: {name}")
        return GENERATORS[name](arg)

    return MARKER.sub(one, markdown)


# --- MkDocs events --------------------------------------------------------------------------------

def on_page_markdown(markdown, page, config, files):  # noqa: ARG001 - MkDocs hook signature
    return expand(markdown)


def on_files(files, config):
    from mkdocs.structure.files import File

    for png in sorted(REPO.glob("results/*/figures/*.png")):
        uri = "assets/" + png.relative_to(REPO).as_posix()
        files.append(File.generated(config, uri, abs_src_path=str(png)))
    return files
