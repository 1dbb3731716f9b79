"""Paper figures from stored results only (docs/architecture.md: records → table → fit → figures).

``make_all(results_dir, fit_path=None, out_dir=None) -> list[Path]`` writes PNG and PDF of each
of the law's figures; see :mod:`depthwidth.paper_figs.make`. Every figure, the law's and the
experiment kinds', is registered once in :mod:`depthwidth.paper_figs.registry`. Importing this
package loads nothing heavy (matplotlib, pandas and scipy load when a figure is drawn), so the
CLI stays quick.
"""

from __future__ import annotations

from pathlib import Path

from depthwidth.fits.options import FitOptions

__all__ = ["make_all"]


def make_all(results_dir: str | Path, fit_path: str | Path | None = None,
             out_dir: str | Path | None = None, options: FitOptions = FitOptions()) -> list[Path]:
    """Write the law's figures (PNG and PDF each; :mod:`depthwidth.paper_figs.registry`) to
    ``out_dir`` (default ``results_dir/figures``) from the records under ``results_dir`` and the
    fit file ``fit_path`` (computed in memory with the fits package and ``options`` when None).
    Returns the paths written, PNG then PDF per figure. Raises UserError for a missing or empty results
    directory or a malformed fit file."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.paper_figs.make import make_all as _make_all

    return _make_all(results_dir, fit_path, out_dir, options)
