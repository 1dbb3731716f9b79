"""The depth-to-width law: the :class:`Law` type, the built-in published law, fit-file format, loading.

Levine et al. 2020 ("The Depth-to-Width Interplay in Self-Attention", NeurIPS 2020,
arXiv 2006.12467 v3, experiments section) locate *transition points*, the model size at which a
deeper self-attention network starts to beat a shallower one of equal size, and fit

    ln(d_x) = a + b·L                     (natural log; d_x width, L depth)

with N = 12·L·d_x² the non-embedding parameter count of Kaplan et al. 2020. Read as "depth L
is optimal at width exp(a + b·L)", it gives the size at which depth L is optimal,
N(L) = 12·L·exp(2a + 2b·L) (see :mod:`depthwidth.fits.projections`). That is the default
*form* of the law; a fit may use another (``fit --law-form``, e.g. ln d_x = a + b·ln L): each
form is a class in :mod:`depthwidth.fits.forms`, and a :class:`Law` is a form with its (a, b).

This module is import-light (stdlib only): it is on the ``depthwidth query`` path.

Fit file format (JSON, written by ``depthwidth fit``, read by ``query --fit PATH``)
----------------------------------------------------------------------------------
Top level::

    format              "depthwidth-fit"
    version             1
    status              "ok" (a law was fitted) | "insufficient" (fewer than 2 transition points)
    law                 object below, or null when status is "insufficient"
    points              transition points used in the fit (see transitions.TransitionPoint.to_dict)
    no_crossing         depth pairs without a usable crossing, with the reason (same dict shape)
    options             {"pairs": "doubling"|"adjacent", "assign": "geom"|"arith"|"shallow"|"deep",
                         "curve": "pchip-lnN", "bootstrap": int,
                         "resample": "pooled"|"seeds"|"pooled+widths"|"seeds+widths",
                         "seed": int, "n_param": "kaplan 12*L*d^2"}
    table               {"results": str, "n_records": int, "n_used": int, "n_cells": int,
                         "excluded": [{"run_id", "n_layer", "d_model", "seed", "status", "reason"}],
                         "unfinished": [run_id, ...]}
                        (``results``, ``also``, ``cells_of``: by the rule of stored paths,
                        records.stored_path: relative to the fit file's folder, "." when it lies
                        in it, when in its tree or checkout; else absolute)
    warnings            [str, ...]
    depthwidth_version  str

``law``::

    form                the form's formula: "ln(d_x) = a + b*L" (linear-depth, the default) or
                        "ln(d_x) = a + b*ln(L)" (log-depth); absent means the first (fits.forms)
    a, b                floats (natural log; d_x in units of model width, L in layers)
    cov                 [[var_a, cov_ab], [cov_ab, var_b]]   absolute (from the points' errors)
    stderr              {"a": float, "b": float}
    ci95                {"a": [lo, hi], "b": [lo, hi]}       normal 95% intervals
    n_points, dof       int, int (dof = n_points - 2)
    chi2, chi2_red      float | null (null when dof == 0: two points give an exact line)
    r2, r2_unweighted   float | null (weighted with 1/sigma²; null when dof == 0)
    cov_scaled          cov * max(1, chi2_red) (Birge ratio), or null when dof == 0
    bootstrap           {"replicates": int, "cov": 2x2, "ci95": {"a": [lo, hi], "b": [lo, hi]}}
                        the line refitted on every bootstrap replicate (includes the correlation
                        between pairs sharing a depth), or null
    depth_range         [min L, max L] of the fitted points (projections outside it extrapolate)
    b_vs                b's 95% interval against the paper's 0.0555 and the theory's ln 3; null for
                        a form other than the default (those are slopes of ln d_x = a + b*L)

Only ``format``, ``version``, ``status`` and ``law.{form, a, b, cov}`` are needed by ``query``
(``--cov scaled`` / ``--cov bootstrap`` read ``law.cov_scaled`` / ``law.bootstrap.cov``; the
default ``--cov auto`` reads ``cov_scaled`` when ``chi2_red > 1``, see law_from_fit_dict); the rest
is for people and figures. A fit file whose status is not "ok" cannot be queried.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.errors import UserError
from depthwidth.fits.forms import LINEAR, SCALAR, LawForm, form_of_formula

FIT_FORMAT = "depthwidth-fit"
FIT_VERSION = 1


@dataclass(frozen=True)
class Law:
    """A law ``ln d_x = a + b·g(L)`` of a given form with its (optional) parameter covariance.

    a, b: intercept and slope (natural log of width; L in layers).
    cov: 2×2 covariance of (a, b) as nested tuples, or None when unknown (then no CIs).
    depth_range: (L_min, L_max) of the data behind the law; projections outside it extrapolate.
    name: "levine2020" or the fit file path. source: citation or provenance, one line.
    ci_note: why CIs are unavailable (when cov is None).
    form: the functional form (:mod:`depthwidth.fits.forms`), default ln d_x = a + b·L.
    """

    a: float
    b: float
    cov: tuple[tuple[float, float], tuple[float, float]] | None
    depth_range: tuple[float, float] | None
    name: str
    source: str
    ci_note: str | None = None
    form: LawForm = LINEAR

    def ln_width(self, L, xp=SCALAR):
        """ln d_x(L): natural log of the width at which depth L (layers) is optimal."""
        return self.form.ln_width(L, self.a, self.b, xp)

    def ln_width_var(self, L, xp=SCALAR):
        """var ln d_x(L) from the covariance of (a, b) (exact: linear in a, b); None without one."""
        return None if self.cov is None else self.form.ln_width_var(L, self.cov, xp)

    def describe(self, a_fmt: str = "g", b_fmt: str = "g", pretty: bool = False) -> str:
        """``ln d_x = <a> + <b>*L`` (or the form's term) with a and b in the given formats."""
        return self.form.describe(format(self.a, a_fmt), format(self.b, b_fmt), pretty)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "form": self.form.formula,
            "a": self.a,
            "b": self.b,
            "cov": [list(r) for r in self.cov] if self.cov is not None else None,
            "depth_range": list(self.depth_range) if self.depth_range is not None else None,
            "source": self.source,
        }


def levine2020() -> Law:
    """The published law of Levine et al. 2020: a = 5.039, b = 0.0555 (natural log).

    Source: Y. Levine, N. Wies, O. Sharir, H. Bata, A. Shashua, "The Depth-to-Width Interplay in
    Self-Attention", NeurIPS 2020, arXiv 2006.12467 v3: ln(d_x) = 5.039 + 0.0555·L fitted by
    weighted least squares to 5 transition points (R² = 0.998, χ²_red = 0.854, 3 dof), N the
    non-embedding count 12·L·d_x², depths 6 to 48 trained.

    The paper publishes a, b, R² and χ²_red but not the covariance of (a, b) nor the five points
    with their errors, so the covariance cannot be reconstructed: it is left None and every
    projection from this law reports its confidence interval as unavailable rather than invent
    one. ``depth_range`` is the trained depths (6, 48).
    """
    return Law(
        a=5.039,
        b=0.0555,
        cov=None,
        depth_range=(6.0, 48.0),
        name="levine2020",
        source="Levine et al. 2020, NeurIPS, arXiv 2006.12467 v3: ln(d_x) = 5.039 + 0.0555*L",
        ci_note="levine2020: the paper gives no covariance of (a, b), so no confidence interval",
        form=LINEAR,
    )


BUILTIN_LAWS = {"levine2020": levine2020}


def _finite(x: Any, what: str, source: str) -> float:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise UserError(f"{source}: {what} must be a finite number, got {x!r}")
    return float(x)


COV_KINDS = ("auto", "absolute", "scaled", "bootstrap")


def law_from_fit_dict(d: Any, source: str, cov_kind: str = "auto") -> Law:
    """Build a :class:`Law` from a parsed fit file (format above); UserError if malformed.

    cov_kind picks the covariance: "absolute" (law.cov, WLS with absolute sigma), "scaled"
    (law.cov_scaled) or "bootstrap" (law.bootstrap.cov); one that is absent gives cov None.
    "auto" (the default) is "scaled" when the fit is poor (chi2_red > 1 with dof > 0, where the
    points scatter more than their errors allow, so the absolute covariance is too narrow; the
    Birge-ratio convention, e.g. Particle Data Group, Review of Particle Physics, sec. 40
    "Statistics") and "absolute" otherwise; the Law's ``source`` names the one used.
    """
    if cov_kind not in COV_KINDS:
        raise UserError(f"--cov must be one of {', '.join(COV_KINDS)}, got {cov_kind!r}")
    if not isinstance(d, dict) or d.get("format") != FIT_FORMAT:
        raise UserError(f"{source}: not a depthwidth fit file (expected \"format\": \"{FIT_FORMAT}\")")
    if d.get("version") != FIT_VERSION:
        raise UserError(f"{source}: unsupported fit file version {d.get('version')!r} (expected {FIT_VERSION})")
    if d.get("status") != "ok":
        raise UserError(f"{source}: fit status is {d.get('status')!r}, no law to query "
                        "(see its 'warnings' and 'no_crossing')")
    law = d.get("law")
    if not isinstance(law, dict):
        raise UserError(f"{source}: missing 'law' object")
    form = form_of_formula(law.get("form"), source)
    a = _finite(law.get("a"), "law.a", source)
    b = _finite(law.get("b"), "law.b", source)
    chosen = cov_kind
    if cov_kind == "auto":
        chi2_red, dof = law.get("chi2_red"), law.get("dof")
        poor = (isinstance(chi2_red, (int, float)) and isinstance(dof, int) and dof > 0 and chi2_red > 1
                and law.get("cov_scaled") is not None)
        chosen = "scaled" if poor else "absolute"
        cov_kind = f"{chosen}, auto: chi2_red {chi2_red:.3g} > 1" if poor else "absolute, auto"
    if chosen == "absolute":
        cov_raw = law.get("cov")
    elif chosen == "scaled":
        cov_raw = law.get("cov_scaled")
    else:
        boot = law.get("bootstrap")
        cov_raw = boot.get("cov") if isinstance(boot, dict) else None
    cov = None
    if cov_raw is not None:
        if not (isinstance(cov_raw, list) and len(cov_raw) == 2
                and all(isinstance(r, list) and len(r) == 2 for r in cov_raw)):
            raise UserError(f"{source}: law.cov must be a 2x2 list of lists")
        c = [[_finite(v, "law.cov entry", source) for v in r] for r in cov_raw]
        # A covariance must be symmetric positive semi-definite; a 2x2 test needs no numpy.
        sym_tol = 1e-9 * max(1.0, abs(c[0][1]), abs(c[1][0]))
        if abs(c[0][1] - c[1][0]) > sym_tol or c[0][0] < 0 or c[1][1] < 0 \
                or c[0][0] * c[1][1] - c[0][1] * c[1][0] < -1e-12 * max(1.0, c[0][0] * c[1][1]):
            raise UserError(f"{source}: law.cov is not a symmetric positive semi-definite 2x2 matrix")
        cov = ((c[0][0], c[0][1]), (c[1][0], c[1][1]))
    rng = law.get("depth_range")
    depth_range = None
    if rng is not None:
        if not (isinstance(rng, list) and len(rng) == 2):
            raise UserError(f"{source}: law.depth_range must be [min, max]")
        depth_range = (_finite(rng[0], "law.depth_range", source), _finite(rng[1], "law.depth_range", source))
    return Law(a=a, b=b, cov=cov, depth_range=depth_range, name=source,
               source=f"depthwidth fit {source} (cov: {cov_kind})",
               ci_note=None if cov is not None else f"{source}: no {cov_kind} covariance in the fit file", form=form)


def _refuse_directory(path: str | Path, label: str) -> None:
    """UserError when a local ``path`` is a directory (a results directory: say its fit file)."""
    if storage.is_url(path):
        return
    p = storage.path(path)
    if p.is_dir() and (p / "fit.json").is_file():
        raise UserError(f"{label} is a results directory: give its fit file, {p / 'fit.json'}")
    if p.is_dir():
        raise UserError(f"{label} is a directory, not a fit file (a JSON written by depthwidth fit)")


def load_fit_file(path: str | Path, label: str | None = None) -> dict[str, Any]:
    """Read a fit JSON file as a dict; UserError (one line) if missing, a directory, or not JSON.
    ``label`` names the path in the directory error (e.g. "--fit PATH"; default the path)."""
    _refuse_directory(path, label or str(path))
    try:
        return json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        if str(path) in BUILTIN_LAWS:  # a name `query --fit` takes; this command needs the file's points
            raise UserError(f"{path} is a built-in law, not a fit file; this command needs a fit file (fit.json)") from None
        raise UserError(f"fit file not found: {path} (built-in laws: {', '.join(BUILTIN_LAWS)})") from None
    except UnicodeDecodeError:
        raise UserError(f"cannot read fit file {path}: not text (a fit file is JSON written by depthwidth fit)") from None
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read fit file {path}: {e}") from None


def load_law(spec: str, cov_kind: str = "auto") -> Law:
    """Resolve ``--fit``: a built-in name (``levine2020``) or a path to a fit JSON file.

    Raises UserError for an unknown name (a spec that is neither a built-in nor an existing
    file), a directory, a malformed fit file, or a ``cov_kind`` other than "auto" for a built-in
    law without a covariance (there is none to choose, and ignoring the choice would hide that).
    """
    if cov_kind not in COV_KINDS:  # also for a built-in law, which has no covariance to choose
        raise UserError(f"--cov must be one of {', '.join(COV_KINDS)}, got {cov_kind!r}")
    if spec in BUILTIN_LAWS:
        law = BUILTIN_LAWS[spec]()
        if cov_kind != "auto" and law.cov is None:
            raise UserError(f"--cov {cov_kind} needs a fit file as --fit: the built-in law {spec} has no "
                            "covariance of (a, b) (its paper gives none)")
        return law
    p = storage.path(spec)
    if not p.exists():
        raise UserError(f"unknown law {spec!r}: not a built-in ({', '.join(BUILTIN_LAWS)}) and no such file")
    return law_from_fit_dict(load_fit_file(p, f"--fit {spec}"), str(p), cov_kind)  # a directory: one line there
