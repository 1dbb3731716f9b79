"""The four paper figures, one short function each, drawn only from stored results and a fit.

Every function takes already-loaded inputs (:class:`~depthwidth.paper_figs.inputs.FigureInputs`
or plain parameters), returns ``(figure, caption)`` and never trains, fits or writes anything;
:func:`depthwidth.paper_figs.make_all` saves them. Call them inside
:func:`depthwidth.paper_figs.style.figure_style`.

1. :func:`loss_vs_params`      test loss vs N = 12·L·d² per depth, transitions marked
2. :func:`width_vs_depth`      ln d_x vs L: transition points, fitted and published laws, theory
3. :func:`optimal_depth`       optimal depth vs budget, with well-known models placed on it
4. :func:`separation_rank`     separation-rank bounds vs depth for several widths
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

import numpy as np

from depthwidth.errors import UserError
from depthwidth.fits.forms import DEFAULT_FORM
from depthwidth.fits.law import levine2020
from depthwidth.fits.lawfit import Z95
from depthwidth.fits.projections import answerable, classify, query_budget
from depthwidth.fits.projections import optimal_depth as law_depth
from depthwidth.paper_figs.shapes import SHAPES, grouped_labels
from depthwidth.paper_figs.style import COLORS, HEIGHT_IN, WIDTH_IN, depth_colors
from depthwidth.units import format_count


def _pair(p: dict[str, Any]) -> str:
    return f"L{p['L_s']}→L{p['L_d']}"


def _sentences(notes: list[str]) -> str:
    """Notes joined as sentences for a caption."""
    return " ".join(n[:1].upper() + n[1:] + ("" if n.endswith(".") else ".") for n in notes)


def _footnote(fig, lines: list[str]) -> None:
    """Notes under everything already drawn (axes, legends outside them), saved with
    bbox='tight', so they never cover data or a legend."""
    if not lines:
        return
    fig.canvas.draw()
    bottom = fig.get_tightbbox(fig.canvas.get_renderer()).y0 / fig.get_figheight()

    # ~125 characters of 7.5 pt text span the fixed figure width, so notes never widen it.
    text = "\n".join(textwrap.fill(line, 125) for line in lines)
    fig.text(0.01, bottom - 0.015, text, ha="left", va="top", fontsize=7.5, color="#333333")


def _solid_dashed(ax, x, y, inside, color, label: str | None = None, dashed_label: str | None = None) -> None:
    """Draw y(x) solid where ``inside`` (the law's own depth range) and dashed elsewhere; the
    dashed part is widened by one sample on each side so the two pieces join without a gap."""
    inside = np.asarray(inside, dtype=bool)
    outside = ~inside
    outside[:-1] |= ~inside[1:]
    outside[1:] |= ~inside[:-1]
    ax.plot(x, np.where(inside, y, np.nan), color=color, label=label if inside.any() else None)
    ax.plot(x, np.where(outside, y, np.nan), color=color, ls="--", lw=1.1,
            label=(dashed_label or (None if inside.any() else label)) if outside.any() else None)


# ------------------------------------------------------------------------------------ figure 1


def loss_vs_params(inputs) -> tuple[Any, str]:
    """Test loss (nats/token, mean over seeds, error bars = seed std, ddof=1) vs non-embedding
    N = 12·L·d² (Kaplan et al. 2020) on a log axis, one curve per depth. Curves are the
    monotone PCHIP interpolants in ln N that the transition finder uses
    (:mod:`depthwidth.fits.transitions`), so a drawn crossing is the one it found. Each depth
    pair with a crossing gets a dashed line at N* and a band over its 95% bootstrap interval;
    pairs without one are listed under the plot with the reason."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.transforms import blended_transform_factory

    # scipy: ~0.8 s at import; only fitting pays it
    from scipy.interpolate import PchipInterpolator

    cells = inputs.table.cells
    depths = inputs.table.depths()
    colors = depth_colors(depths)
    fig, ax = plt.subplots()
    for L in depths:
        c = cells[cells["n_layer"] == L].sort_values("N")
        N, y = c["N"].to_numpy(float), c["mean"].to_numpy(float)
        yerr = np.nan_to_num(c["std"].to_numpy(float), nan=0.0)  # one seed: no spread to show
        ax.errorbar(N, y, yerr=yerr, fmt="o", ms=4, color=colors[L], label=f"L = {L}", zorder=3)
        if len(N) >= 2:
            x = np.linspace(np.log(N[0]), np.log(N[-1]), 200)
            ax.plot(np.exp(x), PchipInterpolator(np.log(N), y)(x), color=colors[L], lw=1.3, zorder=2)
    ax.set_xscale("log")
    ax.set_xlabel("non-embedding parameters N = 12·L·d²")
    ax.set_ylabel("test loss (nats/token)")
    ax.set_title("Test loss vs size, per depth")

    trans = blended_transform_factory(ax.transData, ax.transAxes)
    notes, crossed, any_ci = [], [], False
    pairs = inputs.transitions()
    for k, p in enumerate(p for p in pairs if p.get("N_star")):
        ci, rng = p.get("N_star_ci95"), p.get("N_range")
        if ci and rng:  # an open bound (N* beyond the measured range there) is drawn to the range's end
            any_ci = True
            ax.axvspan(ci[0] or rng[0], ci[1] or rng[1], color=COLORS["transition"], alpha=0.12, lw=0, zorder=1)
        ax.axvline(p["N_star"], color=COLORS["transition"], ls="--", lw=1.1, zorder=1)
        # Stagger the pair labels so neighbouring transitions do not print on top of each other.
        ax.text(p["N_star"], 0.98 - 0.06 * (k % 3), f" {_pair(p)}", transform=trans, fontsize=8,
                va="top", ha="left", color=COLORS["neutral"])
        flag = " (several crossings: last one)" if p.get("status") == "multiple" else ""
        crossed.append(f"{_pair(p)} N* = {format_count(p['N_star'])}{flag}")
    for p in pairs:
        if not p.get("N_star"):
            rng = p.get("N_range")
            where = f" on N = {format_count(rng[0])}–{format_count(rng[1])}" if rng else ""
            notes.append(f"{_pair(p)}: no crossing{where}: {p.get('meaning') or p.get('status')}")
    if crossed:
        ax.plot([], [], ls="--", color=COLORS["transition"], label="transition N*")
    if any_ci:
        ax.fill_between([], [], color=COLORS["transition"], alpha=0.12, label="95% bootstrap interval")
    # Outside the axes: loss curves fill any corner depending on the sweep, so no corner is safe.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    if inputs.fit is None:
        notes += [n for n in inputs.notes if n.startswith("no fit")]
    _footnote(fig, notes)
    caption = ("Test loss vs non-embedding size N = 12·L·d² per depth (mean over seeds, bars = seed std). "
               + ("Dashed lines: transition sizes N* where the deeper network starts to win"
                  + (", bands: 95% bootstrap intervals" if any_ci else "") + ". Crossings: "
                  + "; ".join(crossed) + ". " if crossed else "No pair crossed. ")
               + _sentences(notes))
    return fig, caption.strip()


# ------------------------------------------------------------------------------------ figure 2


def width_vs_depth(inputs) -> tuple[Any, str]:
    """ln d_x vs depth L, on one plot:

    - the transition points of this sweep (assigned depth L, ln d_x = ½·ln(N*/12L), error bars =
      bootstrap σ of ln d_x), from the fit;
    - the fitted law in its own form, ln d_x = a + b·g(L) (g(L) = L by default, ln L for a
      ``--law-form log-depth`` fit; :mod:`depthwidth.fits.forms`), with a 95% band
      ±1.96·sqrt([1 g]·cov·[1 g]ᵀ) from the fit covariance (solid over the fitted depth range,
      dashed where extrapolated; a form undefined at L = 0, like ln L, starts after it);
    - the published law of Levine et al. 2020, ln d_x = 5.039 + 0.0555·L (solid over its
      trained depths 6–48);
    - the theoretical threshold L = log₃ d_x, i.e. ln d_x = L·ln 3 (Levine et al. 2020;
      Levine et al. 2020): above it a network is depth-efficient.

    The axes span depth 0–50 (all published depths) and the widths of the points and both laws,
    so the theory line, 20 times steeper than the published one, leaves the top of the plot:
    that gap is the result, not a drawing artefact.
    """
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # mpmath: ~0.1 s at import; only the separation-rank bounds pay it
    from depthwidth.theory.separation import BASE

    pub = levine2020()
    points = [p for p in inputs.transitions() if p.get("ln_d_x") is not None]
    Lmax = max([50.0] + [1.05 * p["L"] for p in points])
    x = np.linspace(0.0, Lmax, 300)
    fig, ax = plt.subplots()

    ys = [pub.a + pub.b * x]
    if inputs.law is not None:
        law = inputs.law
        with np.errstate(divide="ignore", invalid="ignore"):  # ln L at L = 0: dropped below
            y = law.ln_width(x, np)
        drawn = np.isfinite(y)
        xf, y = x[drawn], y[drawn]
        ys.append(y)
        lo, hi = law.depth_range or (xf[0], xf[-1])
        inside = (xf >= lo) & (xf <= hi)
        _solid_dashed(ax, xf, y, inside, COLORS["fit"], f"this fit: {law.describe('.3f', '.4f', pretty=True)}")
        if law.cov is not None:
            se = np.sqrt(law.ln_width_var(xf, np))
            ax.fill_between(xf, y - Z95 * se, y + Z95 * se, color=COLORS["fit"], alpha=0.15, lw=0,
                            label="95% band (fit covariance)")
    pin = (x >= pub.depth_range[0]) & (x <= pub.depth_range[1])
    y_pub = pub.a + pub.b * x
    _solid_dashed(ax, x, y_pub, pin, COLORS["levine2020"], f"Levine et al. 2020: ln d_x = {pub.a} + {pub.b}·L")
    ln3 = math.log(BASE)
    ax.plot(x, ln3 * x, color=COLORS["theory"], lw=1.8,
            label=f"theory threshold L = log₃ d_x: ln d_x = {ln3:.4f}·L")
    if points:
        ax.errorbar([p["L"] for p in points], [p["ln_d_x"] for p in points],
                    yerr=[p.get("sigma_ln_d_x") or 0.0 for p in points], fmt="o", ms=5,
                    color=COLORS["neutral"], zorder=4, label="transition points (this sweep)")
        for p in points:
            ax.annotate(f"{p['L_s']}/{p['L_d']}", (p["L"], p["ln_d_x"]), xytext=(5, -10),
                        textcoords="offset points", fontsize=7.5, color=COLORS["neutral"])

    # y range: the data and both empirical laws over the plotted depths, not the bands (which
    # explode when a small sweep is extrapolated) and not the theory line (which would flatten
    # everything else); the theory line is then seen leaving through the top.
    vals = np.concatenate([np.ravel(v) for v in ys] + [np.array([p["ln_d_x"] for p in points] or [pub.a])])
    y_lo = max(0.0, math.floor(np.nanmin(vals) - 1.0))
    y_hi = math.ceil(np.nanmax(vals) + 1.0)
    ax.set_xlim(0, Lmax)
    ax.set_ylim(y_lo, y_hi)
    ax.set_xlabel("depth L (layers)")
    ax.set_ylabel("ln d_x (transition width)")
    ax.set_title("Transition width vs depth: experiment, published law, theory")
    sec = ax.secondary_yaxis("right", functions=(np.exp, lambda w: np.log(np.maximum(w, 1e-300))))
    sec.set_ylabel("d_x")
    ticks = [2**k for k in range(0, 40) if y_lo <= k * math.log(2) <= y_hi]
    sec.set_yticks(ticks[:: max(1, len(ticks) // 8)])
    sec.set_yticklabels([f"{t:,}" for t in ticks[:: max(1, len(ticks) // 8)]])
    L_top = y_hi / ln3
    ax.annotate(f"theory leaves the plot at L ≈ {L_top:.1f}\n(slope {ln3:.3f} vs {pub.b} published)",
                xy=(L_top * 0.97, y_hi * 0.97), xytext=(L_top + 3.0, y_hi - 0.25 * (y_hi - y_lo)),
                fontsize=8, color=COLORS["theory"], arrowprops={"arrowstyle": "->", "color": COLORS["theory"]})
    ax.text(0.98, 0.03, "below the green line: L > log₃ d_x, depth-inefficient (theory)",
            transform=ax.transAxes, ha="right", va="bottom", fontsize=7.5, color=COLORS["theory"])
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, fontsize=7.5)
    notes = [] if inputs.law is not None else [n for n in inputs.notes if "fit" in n] or ["no fitted law"]
    _footnote(fig, notes)
    fit_txt = ""
    if inputs.law is not None:
        law = inputs.law
        of_form = "" if law.form.key == DEFAULT_FORM else f" of {law.form.describe('a', 'b', pretty=True)}"
        fit_txt = f"This fit: a = {law.a:.3f}, b = {law.b:.4f}{of_form} ({len(points)} points). "
    caption = ("ln of the transition width vs depth: "
               + ("transition points of this sweep (bars: bootstrap σ), " if points else "no transition points, ")
               + ("the fitted law with its 95% band from the fit covariance, " if inputs.law is not None else "")
               + f"the published law of Levine et al. 2020 (a = {pub.a}, b = {pub.b}) and the theoretical "
               "threshold ln d_x = L·ln 3. " + fit_txt
               + f"The theory slope ({ln3:.3f}) is {ln3 / pub.b:.0f}× the published one. " + _sentences(notes))
    return fig, caption.strip()


# ------------------------------------------------------------------------------------ figure 3

BUDGETS = (1e6, 1e13)
_N_BUDGETS = 36  # the law is smooth in ln N: 5 points a decade draw it exactly at this scale
_VERDICT_COLORS = {"too deep": "#CC79A7", "near optimal": "#009E73", "too wide": "#E69F00"}


def _law_curve(law, budgets) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Optimal depth per budget and, if the law has a covariance, its 95% Monte Carlo interval
    (:func:`depthwidth.fits.projections.query_budget`, the numbers ``depthwidth query`` prints)."""
    L, lo, hi = [], [], []
    largest = answerable(law)["max_budget"]
    for B in budgets:
        # outside the range query_budget answers (under one layer, past its largest budget): nothing to draw
        if law_depth(float(B), law) < 1.0 or B > largest:
            L.append(np.nan), lo.append(np.nan), hi.append(np.nan)
            continue
        q = query_budget(float(B), law)
        L.append(q["optimal_depth"])
        ci = (q.get("ci") or {}).get("optimal_depth")
        lo.append(ci[0] if ci else np.nan)
        hi.append(ci[1] if ci else np.nan)
    if law.cov is None:
        return np.array(L), None, None
    return np.array(L), np.array(lo), np.array(hi)


def _place_labels(ax, xy, labels: list[str], lines=(), avoid=()) -> None:
    """Greedy label placement: for each point (in order) take the first of eight offsets whose
    text box stays inside the axes and overlaps no label placed so far, no marker, no sampled
    point of ``lines`` (a list of (x, y) data arrays) and no artist in ``avoid`` (legends);
    if every offset clashes, the one with the fewest clashes."""
    fig = ax.figure
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    ax_box = ax.get_window_extent(r)
    boxes = []
    for px, py in ax.transData.transform(np.asarray(xy, dtype=float)):
        boxes.append((px - 5, py - 5, px + 5, py + 5))
    for lx, ly in lines:
        pts = ax.transData.transform(np.column_stack([lx, ly]))
        pts = pts[np.all(np.isfinite(pts), axis=1)]
        if len(pts) < 2:
            continue
        # Resample every ~3 px along the drawn curve so no label slips between samples.
        seg = np.r_[0.0, np.cumsum(np.hypot(*np.diff(pts, axis=0).T))]
        t = np.linspace(0.0, seg[-1], max(2, int(seg[-1] / 3.0)))
        for px, py in zip(np.interp(t, seg, pts[:, 0]), np.interp(t, seg, pts[:, 1])):
            boxes.append((px - 1.5, py - 1.5, px + 1.5, py + 1.5))
    for a in avoid:
        e = a.get_window_extent(r)
        boxes.append((e.x0, e.y0, e.x1, e.y1))
    # Near offsets first; far ones (with a leader line) only when every near one clashes.
    near = [(6, 3), (6, -3), (0, 8), (0, -8), (-6, 3), (-6, -3)]
    far = [(r * math.cos(t), r * math.sin(t)) for r in (18, 30, 44) for t in np.linspace(0, 2 * math.pi, 12, endpoint=False)]

    def clashes(b) -> int:
        outside = not (b[0] >= ax_box.x0 and b[2] <= ax_box.x1 and b[1] >= ax_box.y0 and b[3] <= ax_box.y1)
        return 100 * outside + sum(b[0] < q[2] and q[0] < b[2] and b[1] < q[3] and q[1] < b[3] for q in boxes)

    # Crowded points first, while there is still room next to them.
    disp = ax.transData.transform(np.asarray(xy, dtype=float))
    crowd = [int(np.sum(np.hypot(*(disp - p).T) < 60)) for p in disp]
    order = sorted(range(len(xy)), key=lambda i: -crowd[i])
    for (x, y), text in ((xy[i], labels[i]) for i in order):
        best = None
        for k, (dx, dy) in enumerate(near + far):
            ha = "left" if dx > 1 else "right" if dx < -1 else "center"
            va = "bottom" if dy > 1 else "top" if dy < -1 else "center"
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                            fontsize=7, color="#222222")
            e = t.get_window_extent(r)
            b = (e.x0 - 1, e.y0 - 1, e.x1 + 1, e.y1 + 1)
            n = clashes(b) + 0.5 * (k >= len(near))  # a leader line costs less than an overlap
            if best is None or n < best[0]:
                if best is not None:
                    best[1].remove()
                best = (n, t, b, k >= len(near))
            else:
                t.remove()
            if n <= 0.5 * (k >= len(near)):
                break
        if best[3]:
            best[1].arrow_patch = None
            best[1].remove()
            t = ax.annotate(best[1].get_text(), (x, y), xytext=best[1].xyann, textcoords="offset points",
                            ha=best[1].get_ha(), va=best[1].get_va(), fontsize=7, color="#222222",
                            arrowprops={"arrowstyle": "-", "color": "#777777", "lw": 0.6, "shrinkA": 0, "shrinkB": 3})
        boxes.append(best[2])


def optimal_depth(inputs, shapes=None) -> tuple[Any, str]:
    """Optimal depth L* vs non-embedding budget N (1e6–1e13, log x): the root of
    N = 12·L·exp(2a + 2b·L) (Levine et al. 2020 law, :mod:`depthwidth.fits.projections`) for the
    published law (no band: the paper gives no covariance) and, when present, this sweep's fit
    with its 95% Monte Carlo band (solid inside the fitted depth range, dashed where it
    extrapolates). Well-known models (:mod:`depthwidth.paper_figs.shapes`) are placed at
    N = 12·L·d² -- exact for GPT-2-style blocks, approximate for SwiGLU/multi-query ones
    (PaLM's true count is ≈ 14·L·d²) -- and coloured by the published law's verdict
    (:func:`depthwidth.fits.projections.classify`, ±10 %): above the curve too deep for their
    size, below it too wide."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.lines import Line2D


    shapes = SHAPES if shapes is None else shapes
    budgets = np.geomspace(*BUDGETS, _N_BUDGETS)
    pub = levine2020()
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN * 1.25))
    L_pub, _, _ = _law_curve(pub, budgets)
    ax.plot(budgets, L_pub, color=COLORS["levine2020"], label="Levine et al. 2020 law")
    curves = [(budgets, L_pub)]
    notes = []
    if inputs.law is not None:
        law = inputs.law
        try:
            L_fit, lo, hi = _law_curve(law, budgets)
        except UserError as e:  # e.g. a fitted slope b <= 0 has no optimal depth
            notes.append(f"this fit not drawn: {e}")
        else:
            lo_L, hi_L = law.depth_range or (0, np.inf)
            inside = (L_fit >= lo_L) & (L_fit <= hi_L)
            curves.append((budgets, L_fit))
            _solid_dashed(ax, budgets, L_fit, inside, COLORS["fit"], "this fit",
                          "this fit, extrapolated\nbeyond its depths")
            if lo is not None and np.isfinite(lo).any():
                ax.fill_between(budgets, lo, hi, color=COLORS["fit"], alpha=0.15, lw=0,
                                label="95% band (this fit)")
    elif inputs.notes:
        notes.append("this sweep has no fitted law: " + "; ".join(inputs.notes))

    xy, labels, verdicts = [], [], {}
    for L, _d, label, rows in grouped_labels(shapes):
        N = rows[0].kaplan_params
        verdicts[label] = classify(L, law_depth(N, pub))
        ax.scatter([N], [L], s=34, color=_VERDICT_COLORS[verdicts[label]], edgecolors="black",
                   linewidths=0.6, zorder=4)
        xy.append((N, L))
        labels.append(label)
    ax.set_xscale("log")
    ax.set_xlim(*BUDGETS)
    # Linear depth: the models sit at 12–118 layers and need the room; a log axis crowds them.
    ax.set_ylim(0, 10 * math.ceil(1.08 * max(np.nanmax(L_pub), max(L for _, L in xy)) / 10))
    ax.set_xlabel("non-embedding budget N = 12·L·d² (parameters)")
    ax.set_ylabel("depth L (layers)")
    ax.set_title("Optimal depth for a budget, and the shapes people built")
    # Legends outside the axes: which corner is empty depends on the fit, so none is safe.
    leg1 = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, title="optimal depth",
                     title_fontsize=8, alignment="left")
    ax.add_artist(leg1)
    handles = [Line2D([], [], ls="", marker="o", mfc=c, mec="black", label=v) for v, c in _VERDICT_COLORS.items()]
    ax.legend(handles=handles, loc="lower left", bbox_to_anchor=(1.01, 0.0), borderaxespad=0.0,
              title="model, vs the\npublished law (±10%)", title_fontsize=8, alignment="left")
    _place_labels(ax, xy, labels, lines=curves)
    notes.append("Models placed at N = 12·L·d² (Kaplan et al. 2020): exact for GPT-2-style blocks, "
                 "approximate for SwiGLU/multi-query models (PaLM's true count is ≈ 14·L·d²). "
                 "Shapes and sources: depthwidth/paper_figs/shapes.py.")
    _footnote(fig, notes)
    deep = [k for k, v in verdicts.items() if v == "too deep"]
    near = [k for k, v in verdicts.items() if v == "near optimal"]
    wide = [k for k, v in verdicts.items() if v == "too wide"]
    caption = ("Optimal depth vs non-embedding budget from the published law (Levine et al. 2020)"
               + (" and this sweep's fit (95% band)" if inputs.law is not None else "")
               + ", with well-known models at N = 12·L·d². Against the published law, too deep: "
               + (", ".join(deep) or "none") + "; near optimal: " + (", ".join(near) or "none")
               + "; too wide: " + (", ".join(wide) or "none") + ". " + _sentences(notes))
    return fig, caption


# ------------------------------------------------------------------------------------ figure 4

THEORY_WIDTHS = (64, 512, 4096, 32768)
THEORY_DEPTHS = tuple(range(1, 15))
THEORY_HEADS = 2


def separation_rank(widths=THEORY_WIDTHS, depths=THEORY_DEPTHS, n_head: int = THEORY_HEADS) -> tuple[Any, str]:
    """log₃ of separation-rank bounds vs depth for several widths (Levine et al. 2020, Theorems 1 and 2),
    all numbers from :mod:`depthwidth.theory.separation`, at whole depths:

    left: the counting bound log₃ C(3^L + d_x, d_x) with its two asymptotic branches
    3^L·log₃ d_x (3^L ≪ d_x) and L·d_x (3^L ≫ d_x); right: the published-form lower and upper
    bounds (constants reconstructed, see :mod:`depthwidth.theory.constants`), H = ``n_head``.
    The threshold L = log₃ d_x is marked per width: left of it the bound grows double-
    exponentially with depth, right of it only linearly.
    """
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.lines import Line2D

    # mpmath: ~0.1 s at import; only the separation-rank bounds pay it
    from depthwidth.theory import separation as sep

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(WIDTH_IN * 1.25, HEIGHT_IN), sharey=True)
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib

    cmap = matplotlib.colormaps["plasma"]
    cols = {d: cmap(0.1 + 0.75 * i / max(1, len(widths) - 1)) for i, d in enumerate(widths)}
    Ls = np.array(depths, dtype=float)
    for d in widths:
        count = [sep.log_monomial_count(L, d) for L in depths]
        br = [sep.count_branches(L, d) for L in depths]
        ax0.plot(Ls, count, color=cols[d], lw=2.0, marker="o", ms=3)
        ax0.plot(Ls, [b["shallow"] for b in br], color=cols[d], ls="--", lw=1.0)
        ax0.plot(Ls, [b["deep"] for b in br], color=cols[d], ls=":", lw=1.2)
        bd = [sep.bounds(L, d, n_head) for L in depths]
        lo = np.array([b["log3_sep_lower"] for b in bd])
        hi = np.array([b["log3_sep_upper"] for b in bd])
        ax1.fill_between(Ls, np.where(lo > 0, lo, np.nan), hi, color=cols[d], alpha=0.25, lw=0)
        ax1.plot(Ls, hi, color=cols[d], lw=1.4)
        ax1.plot(Ls, np.where(lo > 0, lo, np.nan), color=cols[d], lw=1.0, ls="-.")
        th = sep.threshold_depth(d)
        for ax in (ax0, ax1):
            ax.axvline(th, color=cols[d], lw=0.8, alpha=0.7, zorder=1)
    ymax = max(max(sep.log_monomial_count(max(depths), d) for d in widths), 1.0)
    for ax in (ax0, ax1):
        ax.set_yscale("log")
        ax.set_xlim(Ls[0] - 0.3, Ls[-1] + 0.3)
        ax.set_ylim(0.5, ymax * 50)
        ax.set_xlabel("depth L (layers)")
        ax.set_xticks(Ls[:: 2 if len(Ls) > 8 else 1])
    ax0.set_ylabel("log₃ separation rank (bound)")
    ax0.set_title("Counting bound log₃ C(3^L + d_x, d_x)")
    ax1.set_title(f"Published-form bounds, H = {n_head} (constants reconstructed)", fontsize=9.5)
    width_handles = [Line2D([], [], color=cols[d], lw=2, label=f"d_x = {d:,} (L_th = {sep.threshold_depth(d):.2f})")
                     for d in widths]
    ax0.legend(handles=width_handles, loc="upper left", fontsize=7)
    ax0.add_artist(ax0.get_legend())
    style_handles = [Line2D([], [], color="k", lw=2.0, label="exact count"),
                     Line2D([], [], color="k", ls="--", lw=1.0, label="3^L·log₃ d_x (3^L ≪ d_x)"),
                     Line2D([], [], color="k", ls=":", lw=1.2, label="L·d_x (3^L ≫ d_x)"),
                     Line2D([], [], color="k", lw=0.8, alpha=0.7, label="threshold L = log₃ d_x (vertical)")]
    ax0.legend(handles=style_handles, loc="lower right", fontsize=7)
    ax1.legend(handles=[Line2D([], [], color="k", lw=1.4, label="upper bound"),
                        Line2D([], [], color="k", ls="-.", lw=1.0, label="lower bound (where > 0)"),
                        Line2D([], [], color="k", lw=0.8, alpha=0.7, label="threshold L = log₃ d_x (vertical)")],
               loc="lower right", fontsize=7)
    fig.tight_layout()
    caption = ("Separation-rank bounds of an L-layer, width-d_x self-attention network (Levine et al. 2020). "
               "Left: the counting bound log₃ C(3^L + d_x, d_x) follows 3^L·log₃ d_x (double-exponential in depth) "
               "below the threshold L = log₃ d_x and L·d_x (linear in depth) above it; right: the published-form "
               f"lower and upper bounds (constants reconstructed), H = {n_head}. Widths: "
               + ", ".join(f"{d:,}" for d in widths) + ".")
    return fig, caption
