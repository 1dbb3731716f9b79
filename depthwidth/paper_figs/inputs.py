"""What the figures are drawn from: the results table and a fit, both read from storage.

Figures never train anything (docs/architecture.md: config → run → record → table → fit → figures). The
table comes from ``RESULTS/runs/*/record.json`` via :func:`depthwidth.fits.table.load_table`
(with the records of the further directories a fit file names in ``table.also``, ``fit --also``);
the fit is either a fit JSON file written by ``depthwidth fit`` (format in
:mod:`depthwidth.fits.law`) or, when none is given, computed in memory from the same table by
:func:`depthwidth.fits.lawfit.build_fit` with the given :class:`~depthwidth.fits.options.FitOptions`
(default: the defaults of ``depthwidth fit``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.errors import UserError
from depthwidth.fits.law import BUILTIN_LAWS, FIT_FORMAT, FIT_VERSION, law_from_fit_dict, load_fit_file
from depthwidth.fits.options import FitOptions
from depthwidth.records import resolve_stored


@dataclass
class FigureInputs:
    """table: :class:`~depthwidth.fits.table.ResultsTable`; fit: the fit-file dict (status "ok"
    or "insufficient"), or None when no fit could be made; fit_source: the fit file path or
    "computed in memory"; law: the fitted :class:`~depthwidth.fits.law.Law` (None unless status
    is "ok"); notes: one-line remarks the figures and the CLI report (why something is missing)."""

    table: Any
    fit: dict[str, Any] | None
    fit_source: str
    law: Any = None
    notes: list[str] = field(default_factory=list)
    pairs: list[dict[str, Any]] | None = None

    def transitions(self) -> list[dict[str, Any]]:
        """Every depth pair examined (with and without a crossing), sorted by (L_s, L_d): the
        fit's ``points`` + ``not_fitted`` (crossings the law leaves out; fit files before issue 9
        have none) + ``no_crossing``, or, when no fit could be made, ``pairs`` from
        :func:`depthwidth.fits.transitions.compute_transitions` alone."""
        if self.fit is not None:
            rows = [p for key in ("points", "not_fitted", "no_crossing") for p in self.fit.get(key) or []]
        else:
            rows = list(self.pairs or [])
        return sorted(rows, key=lambda p: (p["L_s"], p["L_d"]))


def _check_fit_dict(fit: Any, source: str) -> dict[str, Any]:
    if not isinstance(fit, dict) or fit.get("format") != FIT_FORMAT:
        raise UserError(f"{source}: not a depthwidth fit file (expected \"format\": \"{FIT_FORMAT}\")")
    if fit.get("version") != FIT_VERSION:
        raise UserError(f"{source}: unsupported fit file version {fit.get('version')!r} (expected {FIT_VERSION})")
    for key in ("points", "no_crossing"):
        rows = fit.get(key)
        if not isinstance(rows, list) or not all(isinstance(p, dict) and "L_s" in p and "L_d" in p for p in rows):
            raise UserError(f"{source}: '{key}' must be a list of transition points with L_s and L_d")
    return fit


def _beside(fitted_on: str, fit_path) -> str:
    """The results directory a fit file names (stored by :func:`depthwidth.fits.lawfit.stored_fit`),
    as a path from here (:func:`depthwidth.records.resolve_stored`)."""
    return resolve_stored(fitted_on, fit_path)


def _shown(d: str) -> str:
    """``d`` as the user would type it: relative to the working directory when under it."""
    if storage.is_url(d):
        return d
    p = Path(d).resolve()
    try:
        return str(p.relative_to(Path.cwd().resolve())) or "."
    except ValueError:
        return str(p)


def load_inputs(results_dir: str | Path, fit_path: str | Path | None = None,
                options: FitOptions = FitOptions()) -> FigureInputs:
    """Read the results table and the fit (file, or computed in memory with ``options`` when
    ``fit_path`` is None).

    Raises UserError (one line) when the results directory is missing, holds no usable run, or
    the fit file is missing or malformed. A fit that cannot be computed from the results (e.g. no
    depth pair, one seed per cell) is not an error: the figures are drawn without it and the
    reason is kept in ``notes``.
    """
    # pandas: ~0.5 s at import; query and --help must not pay it
    from depthwidth.fits.table import load_table

    root = storage.path(results_dir)
    if not root.is_dir():
        raise UserError(f"results directory {'is a file' if root.exists() else 'not found'}: {results_dir}")
    if fit_path is not None and str(fit_path) in BUILTIN_LAWS and not storage.path(fit_path).exists():
        raise UserError(f"--fit takes a fit file written by `depthwidth fit`; the published law "
                        f"{fit_path} is always drawn")
    notes: list[str] = []
    pairs = None
    if fit_path is not None:
        fit = _check_fit_dict(load_fit_file(fit_path), str(fit_path))
        source = str(fit_path)
        fitted_on = (fit.get("table") or {}).get("results")
        if fitted_on and not storage.same_location(_beside(fitted_on, fit_path), results_dir):
            notes.append(f"fit {fit_path} was made from {_shown(_beside(fitted_on, fit_path))}, not from {results_dir}")
        # a fit of several directories (fit --also) is drawn with all of its records
        also = (fit.get("table") or {}).get("also") or []
        if not isinstance(also, list) or not all(isinstance(d, str) and d for d in also):
            raise UserError(f"fit file {fit_path}: table.also must be a list of results directories")
        # ... and of the seeds it was fitted on (fit --seeds): a later seed's records must not
        # enter the curves and bands drawn beside this fit's N*
        seeds = (fit.get("table") or {}).get("seeds")
        if seeds is not None and not (isinstance(seeds, list) and seeds
                                      and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in seeds)):
            raise UserError(f"fit file {fit_path}: table.seeds must be a non-empty list of seeds")
        table = load_table(root, also=[_beside(d, fit_path) for d in also] or None, seeds=seeds)
    else:
        table = load_table(root)
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        from depthwidth.fits.lawfit import build_fit

        source = "computed in memory"
        try:
            fit = build_fit(table, **options.kwargs())
        except UserError as e:
            fit = None
            notes.append(f"no fit: {e}")
            # The transitions may still exist (e.g. one seed per cell: no error to weight by).
            from depthwidth.fits.transitions import compute_transitions

            try:
                pairs = [p.to_dict() for p in compute_transitions(table, **options.kwargs())[0]]
            except UserError:
                pairs = None
    law = None
    if fit is not None and fit.get("status") == "ok":
        law = law_from_fit_dict(fit, source)
    elif fit is not None:
        notes.append(f"fit status {fit.get('status')!r}: fewer than 2 fitted transition points, no law")
        notes += [w for w in fit.get("warnings") or [] if "not fitted" in w]
    return FigureInputs(table=table, fit=fit, fit_source=source, law=law, notes=notes, pairs=pairs)
