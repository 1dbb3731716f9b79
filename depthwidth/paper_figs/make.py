"""Draw and save all paper figures from a results directory (and optionally a fit file)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.fits.options import FitOptions
from depthwidth.paper_figs import registry
from depthwidth.paper_figs.inputs import load_inputs
from depthwidth.paper_figs.style import figure_style, save


def render(results_dir: str | Path, fit_path: str | Path | None = None,
           out_dir: str | Path | None = None, options: FitOptions = FitOptions()) -> dict[str, Any]:
    """Write the law's figures (:func:`depthwidth.paper_figs.registry.of` ``LAW``: PNG + PDF) to ``out_dir`` (default ``results_dir/figures``); without
    ``fit_path`` the fit is computed in memory with ``options``.

    Returns {"out_dir", "fit_source", "law": {a, b, cov, ...} or None, "law_text": the law in its
    form's words (``ln d_x = 3.09 + 0.184*L``, ``... *ln(L)``) or None, "notes": [str],
    "figures": [{"name", "png", "pdf", "caption", "written"}], "wall_s"}; ``written`` is False for
    a figure whose PNG and PDF already held the same bytes (left untouched). Raises UserError for a missing
    or empty results directory or a malformed fit file (see :func:`load_inputs`).
    """
    t0 = time.perf_counter()
    inputs = load_inputs(results_dir, fit_path, options)
    out = storage.path(out_dir if out_dir is not None else f"{str(results_dir).rstrip('/')}/figures")
    given = {"inputs": inputs, "options": options}
    drawn = []
    with figure_style():
        for f in registry.of(registry.LAW):  # the law's figures, in their registered order
            fig, caption = f.load()(*(given[k] for k in f.takes))
            written: list[Path] = []
            png, pdf = save(fig, out, f.name, written)
            drawn.append({"name": f.name, "png": str(png), "pdf": str(pdf), "caption": caption,
                          "written": bool(written)})
    return {
        "out_dir": str(out),
        "fit_source": inputs.fit_source,
        "law": inputs.law.to_dict() if inputs.law is not None else None,
        "law_text": inputs.law.describe(".4g", ".4g") if inputs.law is not None else None,
        "notes": inputs.notes,
        "figures": drawn,
        "wall_s": round(time.perf_counter() - t0, 3),
    }


def make_all(results_dir: str | Path, fit_path: str | Path | None = None,
             out_dir: str | Path | None = None, options: FitOptions = FitOptions()) -> list[Path]:
    """Every figure file (PNG and PDF of each figure, in figure order; those that already held the same
    bytes left untouched); see :func:`render`."""
    rep = render(results_dir, fit_path, out_dir, options)
    return [storage.path(f[k]) for f in rep["figures"] for k in ("png", "pdf")]
