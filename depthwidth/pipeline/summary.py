"""What ``depthwidth reproduce`` reports: the fit next to the published law and the theory.

Per corpus (:func:`corpus_summary`):

* the fitted a, b with their standard errors and 95% intervals, next to the published
  a = 5.039, b = 0.0555 (Levine et al. 2020, arXiv 2006.12467 v3); the paper gives no errors,
  so the distance is counted in *our* standard errors: z = (b − b_paper)/σ_b; and the theory's
  threshold slope ln 3 = 1.0986 (L_th = log₃ d_x, i.e. ln d_x = L·ln 3; Levine et al. 2020);
* each depth pair: crossed (N* with its 95% bootstrap interval, the width d_x at the pair's
  assigned depth) or not, and on which side the transition must lie (its fit status); and the
  size at which the published law puts that pair's transition, N_paper = 12·L·exp(2a + 2b·L)
  at the same assigned depth L (:func:`depthwidth.fits.projections.transition_params`).

:func:`summary_text` is what the command prints, :func:`summary_markdown` is ``summary.md``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.fits.law import levine2020
from depthwidth.fits.lawfit import THEORY_SLOPE  # ln 3: ln d_x = L ln 3 at the threshold L_th = log3(d_x)
from depthwidth.fits.transitions import format_fraction, format_interval
from depthwidth.records import stored_path
from depthwidth.units import format_count


def compare_law(law: dict[str, Any] | None) -> dict[str, Any]:
    """Fitted law vs the published one: {fitted, paper, theory_slope, z_a, z_b}.

    z = (fitted − paper)/stderr (our stderr: the paper publishes none); None without a law.
    """
    pub = levine2020()
    out: dict[str, Any] = {"paper": {"a": pub.a, "b": pub.b, "source": pub.source},
                           "theory_slope": THEORY_SLOPE, "fitted": None, "z_a": None, "z_b": None}
    if not law:
        return out
    se = law.get("stderr") or {}
    out["fitted"] = {k: law.get(k) for k in ("a", "b", "stderr", "ci95", "n_points", "dof", "chi2_red", "r2")}
    boot = law.get("bootstrap")
    if boot:
        out["fitted"]["bootstrap_ci95"] = boot.get("ci95")
    for k, ref in (("a", pub.a), ("b", pub.b)):
        s = se.get(k)
        if isinstance(s, (int, float)) and s > 0:
            out[f"z_{k}"] = (law[k] - ref) / s
    return out


def _side(p: dict[str, Any]) -> str:
    """Where a pair without a crossing has its transition, in words with the N range."""
    rng = p.get("N_range")
    span = f"N = {format_count(rng[0])}..{format_count(rng[1])}" if rng else "the measured range"
    st = p["status"]
    if st == "deeper_worse_throughout":
        return f"L={p['L_d']} worse than L={p['L_s']} over {span}: transition above {format_count(rng[1]) if rng else 'it'}"
    if st == "deeper_better_throughout":
        return f"L={p['L_d']} better than L={p['L_s']} over {span}: transition below {format_count(rng[0]) if rng else 'it'}"
    if st == "reversed":
        return f"L={p['L_d']} better at small N and worse at large N over {span}: no transition of the expected kind"
    return p.get("meaning") or st


def pair_rows(fit: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per depth pair the fit examined, sorted by (L_s, L_d), with the published law's
    transition size at the pair's assigned depth (module docstring)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits.projections import transition_params

    pub = levine2020()
    rows = []
    for p in sorted(list(fit.get("points") or []) + list(fit.get("not_fitted") or [])
                    + list(fit.get("no_crossing") or []), key=lambda p: (p["L_s"], p["L_d"])):
        crossed = p.get("N_star") is not None
        rows.append({
            "pair": [p["L_s"], p["L_d"]], "L": p["L"], "status": p["status"], "crossed": crossed,
            "fitted": bool(p.get("fitted", crossed)), "bootstrap_fraction": p.get("bootstrap_fraction"),
            "ci95_open": p.get("ci95_open"),
            "N_star": p.get("N_star"), "N_star_ci95": p.get("N_star_ci95"), "d_x": p.get("d_x"),
            "sigma_ln_d_x": p.get("sigma_ln_d_x"), "N_range": p.get("N_range"),
            "N_paper": transition_params(p["L"], pub), "d_x_paper": math.exp(pub.a + pub.b * p["L"]),
            "where": None if crossed else _side(p),
        })
    return rows


def corpus_summary(results: str, fit: dict[str, Any] | None, fit_error: str | None,
                   fit_path: str | None, figures: list[str], figures_error: str | None) -> dict[str, Any]:
    """The summary of one corpus's results (see :func:`reproduce`)."""
    out: dict[str, Any] = {"results": results, "fit_path": fit_path, "fit_error": fit_error,
                           "figures": figures, "figures_error": figures_error}
    if fit is None:
        out.update(status=None, table=None, pairs=[], law=compare_law(None), warnings=[], options=None)
        return out
    out.update(status=fit["status"], table=fit.get("table"), pairs=pair_rows(fit), law=compare_law(fit.get("law")),
               warnings=list(fit.get("warnings") or []), options=fit.get("options"),
               by_assign=fit.get("by_assign"))
    return out


def _law_lines(law: dict[str, Any]) -> list[str]:
    pub, fit = law["paper"], law["fitted"]
    ref = (f"paper: a = {pub['a']}, b = {pub['b']} (Levine et al. 2020); theory threshold slope "
           f"ln 3 = {law['theory_slope']:.4f}")
    if not fit:
        return ["law: not fitted (needs 2 depth pairs that cross)", ref]
    se, ci = fit["stderr"], fit["ci95"]
    lines = [f"law: ln d_x = a + b*L   a = {fit['a']:.3f} ± {se['a']:.3f} [{ci['a'][0]:.3f}, {ci['a'][1]:.3f}]   "
             f"b = {fit['b']:.4f} ± {se['b']:.4f} [{ci['b'][0]:.4f}, {ci['b'][1]:.4f}] (95%)",
             ref]
    stats = f"{fit['n_points']} points"
    stats += f", chi2_red {fit['chi2_red']:.2f}" if fit.get("chi2_red") is not None else " (exact line, dof 0)"
    if law["z_a"] is not None and law["z_b"] is not None:
        stats += f"; ours - paper = {law['z_a']:+.1f} sigma (a), {law['z_b']:+.1f} sigma (b)"
    lines.append(stats)
    return lines


def _pair_line(r: dict[str, Any]) -> str:
    Ls, Ld = r["pair"]
    paper = f"paper's law: N ≈ {format_count(r['N_paper'])} (d_x ≈ {r['d_x_paper']:.0f} at L = {r['L']:.2f})"

    cis = format_interval(r["N_star_ci95"], r.get("ci95_open"), r["N_range"])
    if r["crossed"]:
        frac = r.get("bootstrap_fraction")
        fitted = "" if r.get("fitted", True) else f" (crosses in {format_fraction(frac)} of replicates: not fitted)"
        return (f"({Ls},{Ld}) crossed at N* = {format_count(r['N_star'])} {cis}, d_x = {r['d_x']:.0f} at L = {r['L']:.2f}"
                f"{' (several crossings)' if r['status'] == 'multiple' else ''}{fitted}; {paper}")
    return f"({Ls},{Ld}) no crossing: {r['where']}, 95% interval {cis}; {paper}"


def summary_text(s: dict[str, Any]) -> str:
    """Plain-text summary (what ``depthwidth reproduce`` prints)."""
    sw = s["sweep"]
    lines = [f"reproduce {s['preset']}: {sw['finished'] + sw['diverged']}/{sw['total']} runs have records "
             f"({sw['finished']} finished, {sw['diverged']} diverged; trained now {len(sw['trained'])})"
             + ("" if s["complete"] else " - INCOMPLETE")]
    for f in sw["failed"]:
        lines.append(f"  failed: {f['run_id']}: {f['error']}")
    if sw["busy"]:
        lines.append(f"  {len(sw['busy'])} run(s) still held by other workers; the fit uses what is finished")
    for corpus, c in s["corpora"].items():
        t = c.get("table")
        # The preset's grid is what "runs have records" counts; a refined sweep's fit reads more.
        used = f": the fit uses {t['n_used']} of its {t['n_records']} records" if t else ""
        lines.append(f"[{corpus}] results {c['results']}{used}")
        if c["fit_error"]:
            lines.append(f"  fit: {c['fit_error']}")
        else:
            o = c["options"]
            lines.append(f"  transitions ({o['pairs']} pairs, depth {o['assign']}, bootstrap {o['bootstrap']}):")
            lines += [f"    {_pair_line(r)}" for r in c["pairs"]]
        lines += [f"  {x}" for x in _law_lines(c["law"])]
        for conv, lw in (c.get("by_assign") or {}).items():
            lines.append(f"  law with depth assigned {conv}: " + (f"b = {lw['b']:.4f} [{lw['ci95']['b'][0]:.4f}, "
                         f"{lw['ci95']['b'][1]:.4f}], a = {lw['a']:.3f}" if lw else "none"))
        if c["fit_path"]:
            lines.append(f"  fit: {c['fit_path']}")
        if c["figures"]:
            pngs = [f for f in c["figures"] if f.endswith(".png")]
            lines.append(f"  figures: {', '.join(pngs)} (+ PDF)")
        if c["figures_error"]:
            lines.append(f"  figures: {c['figures_error']}")
    written = s.get("written", s["files"])
    kept = [f for f in s["files"] if f not in written]
    lines.append("; ".join(([f"wrote {', '.join(written)}"] if written else [])
                           + ([f"unchanged {', '.join(kept)}"] if kept else [])))
    return "\n".join(lines)


def summary_markdown(s: dict[str, Any]) -> str:
    """Markdown summary (``summary.md``): the same facts as :func:`summary_text`, with tables
    and the figures embedded by paths relative to the output directory."""
    sw = s["sweep"]
    out = s["out"]
    md = [f"# Reproduction: preset `{s['preset']}`", "", s["description"], "",
          f"Runs: {sw['finished'] + sw['diverged']}/{sw['total']} with records ({sw['finished']} finished, "
          f"{sw['diverged']} diverged)" + ("" if s["complete"] else " - **incomplete**") + ".", ""]
    for corpus, c in s["corpora"].items():
        t = c.get("table")
        md += [f"## {corpus}", "", f"Results: `{_rel(c['results'], out)}`" + (f"; fit: `{_rel(c['fit_path'], out)}`"
                                                                   if c["fit_path"] else "")
               + (f" (from {t['n_used']} of {t['n_records']} records)" if t else ""), ""]
        if c["fit_error"]:
            md += [f"No fit: {c['fit_error']}", ""]
        else:
            md += ["| pair | status | N* | 95% interval | d_x at L | paper's law N (d_x) |",
                   "|---|---|---|---|---|---|"]

            for r in c["pairs"]:
                interval = format_interval(r["N_star_ci95"], r.get("ci95_open"), r["N_range"])
                width = f"{r['d_x']:.0f}" if r["d_x"] else "-"
                status = r["status"] if r["crossed"] else r["where"]
                if r["crossed"] and not r.get("fitted", True):
                    status += f" (in {format_fraction(r['bootstrap_fraction'])} of replicates: not fitted)"
                md.append(f"| ({r['pair'][0]}, {r['pair'][1]}) | {status} | {format_count(r['N_star'])} | {interval} | "
                          f"{width} at {r['L']:.2f} | {format_count(r['N_paper'])} ({r['d_x_paper']:.0f}) |")
            md.append("")
        law = c["law"]
        md += ["| | a | b |", "|---|---|---|"]
        if law["fitted"]:
            f = law["fitted"]
            ci = f["ci95"]
            md.append(f"| fitted (± stderr) | {f['a']:.3f} ± {f['stderr']['a']:.3f} | "
                      f"{f['b']:.4f} ± {f['stderr']['b']:.4f} |")
            md.append(f"| 95% interval | {ci['a'][0]:.3f} to {ci['a'][1]:.3f} | {ci['b'][0]:.4f} to {ci['b'][1]:.4f} |")
            if law["z_a"] is not None and law["z_b"] is not None:
                md.append(f"| fitted - paper, in stderr | {law['z_a']:+.1f} | {law['z_b']:+.1f} |")
        else:
            md.append("| fitted | - | - |")
        md.append(f"| Levine et al. 2020 | {law['paper']['a']} | {law['paper']['b']} |")
        md.append(f"| theory threshold ln d_x = L ln 3 | 0 | {law['theory_slope']:.4f} |")
        md.append("")
        if c.get("by_assign"):
            md += ["The same points with each depth-assignment convention (fits.transitions):", "",
                   "| depth of a point | a | b | b 95% interval |", "|---|---|---|---|"]
            for conv, lw in c["by_assign"].items():
                md.append(f"| {conv} | " + (f"{lw['a']:.3f} | {lw['b']:.4f} | {lw['ci95']['b'][0]:.4f} to "
                          f"{lw['ci95']['b'][1]:.4f} |" if lw else "- | - | - |"))
            md.append("")
        for w in c["warnings"]:
            md.append(f"- {w}")
        if c["warnings"]:
            md.append("")
        for f in c["figures"]:
            if f.endswith(".png"):
                md.append(f"![{Path(f).stem}]({_rel(f, out)})")
        md.append("")
    return "\n".join(md)


def _rel(path: str, base: Path) -> str:
    """``path`` as summary.md (in ``base``) shows it: the rule of stored paths (records.stored_path)."""
    if storage.is_url(path) or storage.is_url(base):
        prefix = str(base).rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else path
    return stored_path(path, base)
