"""Functional forms of the depth-to-width law, one class each: ln d_x = a + b·g(L).

A *form* says how the transition width d_x (units of model width) grows with depth L (layers).
Every form here is linear in its two parameters (a, b), so one weighted least-squares line in
g(L) fits it exactly and the covariance of (a, b) propagates to ln d_x by the gradient (1, g(L)).

    linear-depth   g(L) = L       ln d_x = a + b·L      Levine et al. 2020 (arXiv 2006.12467 v3,
                                                        experiments section); the default
    log-depth      g(L) = ln L    ln d_x = a + b·ln L   a power law d_x ∝ L^b (the alternative the
                                                        project tests against Levine's exponential)

What a form gives (all in natural logs; L in layers, N in parameters):

    fit(L, y, sigma)              WLS of y = ln d_x on g(L) with the points' errors sigma, and its
                                  2×2 covariance (:class:`LawFit`)
    ln_width(L, a, b)             ln d_x(L)
    ln_width_var(L, cov)          var ln d_x(L) = [1, g]·cov·[1, g]ᵀ (delta method, exact here)
    ln_size(L, a, b, V)           ln N_tot(L), N_tot = 12·L·d_x(L)² + V·d_x(L): the size at which
                                  depth L is optimal (Kaplan et al. 2020's non-embedding
                                  N = 12·L·d², plus V·d of embeddings)
    depth_upper(ln B, a, b)       a depth above the root of ln N_tot(L) = ln B, the bracket of the
                                  inverse (optimal depth for a budget, fits.projections)
    unique_optimum(b, V)          whether ln N_tot(L) is strictly increasing, so that the inverse
                                  exists and is unique

A new form is one subclass setting ``key`` (the ``fit --law-form`` name), ``formula`` (stored as
``law.form`` in the fit file), ``term`` / ``term_pretty`` (how b's term prints) and ``g``; it
inherits a generic bracket (doubling) and slope rule (b > 0), and may override them with closed
forms. Register it in :data:`FORMS`.

The formulas take ``xp``, a namespace with numpy's ``log``/``exp``/``maximum``/``minimum``/
``logaddexp``/``where``/``any``: :data:`SCALAR` (the stdlib, for one float) or numpy itself (for
arrays), so one expression serves ``depthwidth query`` (no numpy import) and the Monte Carlo
intervals and figures. Module level imports only the stdlib.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, ClassVar

from depthwidth.errors import UserError


def _logaddexp(x: float, y: float) -> float:
    m = max(x, y)
    return m + math.log(math.exp(x - m) + math.exp(y - m))


# numpy's names over the stdlib, for one float: lets a form's formula run without numpy.
SCALAR = SimpleNamespace(log=math.log, exp=math.exp, maximum=max, minimum=min, logaddexp=_logaddexp,
                         where=lambda c, x, y: x if c else y, any=bool)
_LN12 = math.log(12.0)
_MAX_DOUBLINGS = 1020  # 2**1020 layers: still a finite float, beyond any depth a law is asked about


class InsufficientPoints(UserError):
    """Fewer than 2 transition points: no line can be fitted."""


class LawForm:
    """ln d_x = a + b·g(L): a functional form of the law (module docstring). Stateless; use the
    instances in :data:`FORMS`. Subclasses set key, formula, term, term_pretty and g."""

    key: ClassVar[str]
    formula: ClassVar[str]
    term: ClassVar[str]
    term_pretty: ClassVar[str]
    slope_rule: ClassVar[str] = "b > 0"
    # Whether b is the slope Levine et al. 2020 published (0.0555) and their theory predicts
    # (ln 3), so that a fit compares it with them (``b_vs``); a b of another form is not.
    slope_is_levines: ClassVar[bool] = False

    def g(self, L, xp=SCALAR):
        """The regressor of b: ln d_x = a + b·g(L). L: depth (float or array, layers)."""
        raise NotImplementedError

    def ln_width(self, L, a, b, xp=SCALAR):
        """ln d_x at depth L (natural log of the width at which depth L is optimal)."""
        return a + b * self.g(L, xp)

    def ln_width_var(self, L, cov, xp=SCALAR):
        """var ln d_x(L) = cov_aa + 2·g·cov_ab + g²·cov_bb for cov the 2×2 covariance of (a, b)
        (nested sequences or an array); exact, ln d_x being linear in (a, b)."""
        g = self.g(L, xp)
        return cov[0][0] + 2 * g * cov[0][1] + g * g * cov[1][1]

    def ln_size(self, L, a, b, vocab: float = 0.0, xp=SCALAR):
        """ln N_tot(L) = ln(12·L·d_x² + V·d_x), d_x = d_x(L): the size (parameters) at which depth L
        is optimal; V = ``vocab`` rows of embeddings (0: the non-embedding N = 12·L·d_x² of Kaplan
        et al. 2020, as in Levine et al. 2020). Summed in log space so large L cannot overflow."""
        g = self.g(L, xp)
        x = xp.log(12.0 * L) + 2.0 * a + 2.0 * b * g
        if vocab <= 0:
            return x
        return xp.logaddexp(x, math.log(vocab) + a + b * g)

    def unique_optimum(self, b, vocab: float = 0.0):
        """Whether ln N_tot(L) is strictly increasing in L for slope b (float or array), so that
        every budget has one optimal depth. Default: b > 0 (every term grows with L)."""
        return b > 0

    def depth_upper(self, log_budget: float, a, b, xp=SCALAR):
        """A depth L >= 1 with ln N(L) >= ln B (B = e^log_budget, non-embedding: the embedding only
        adds, so it also bounds N_tot's root). Generic: double from 1 until past the root; where
        no depth below 2**1020 reaches B (b outside the slope rule), that depth."""
        hi = 1.0 + 0.0 * a
        for _ in range(_MAX_DOUBLINGS):
            short = self.ln_size(hi, a, b, 0.0, xp) < log_budget
            if not xp.any(short):
                break
            hi = xp.where(short, 2.0 * hi, hi)
        return hi

    def depth_at_ln_width(self, y: float, a: float, b: float) -> float:
        """The depth whose width is e^y (for error messages: the deepest depth a width bound allows).
        Generic: the bracketed root of ln_width(L) = y (mpmath's Anderson-Björck), inf if none
        below 2**1020 layers."""
        # mpmath: ~0.1 s at import; only the separation-rank bounds pay it
        import mpmath

        lo, hi = 1e-6, 1.0
        while self.ln_width(hi, a, b) < y:
            hi *= 2.0
            if hi > 2.0**_MAX_DOUBLINGS:
                return math.inf
        if self.ln_width(lo, a, b) >= y:
            return lo
        return float(mpmath.findroot(lambda L: self.ln_width(float(L), a, b) - y, (lo, hi), solver="anderson"))

    def describe(self, a: str, b: str, pretty: bool = False) -> str:
        """The law as text with a and b already formatted, e.g. ``ln d_x = 5.039 + 0.0555*L``."""
        return f"ln d_x = {a} + {b}{'·' if pretty else '*'}{self.term_pretty if pretty else self.term}"

    # ------------------------------------------------------------------ fitting

    def fit(self, L, y, sigma, *, absolute: bool = True) -> LawFit:
        """Weighted least squares of y = ln d_x on g(L): ``scipy.optimize.curve_fit`` with
        ``sigma`` and ``absolute_sigma=True`` (Levine et al. 2020, arXiv 2006.12467 v3: "weighted
        least squares with the empirical errors of the transition points"), so cov = (JᵀWJ)⁻¹
        from the errors alone. Statistics as in :mod:`depthwidth.fits.lawfit`'s docstring.

        L: assigned depths (layers), y: ln d_x, sigma: standard errors of y, all shape (n,).
        ``absolute=False``: sigma is ignored, the line is unweighted and its covariance comes from
        the residual scatter (needs n >= 3). Raises InsufficientPoints if n < 2, UserError if sigma
        has non-positive/non-finite entries or all g(L) are equal.
        """
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        import numpy as np

        # scipy: ~0.8 s at import; only fitting pays it
        from scipy.optimize import curve_fit

        L, y, sigma = (np.asarray(v, dtype=float) for v in (L, y, sigma))
        if not absolute:
            sigma = np.ones_like(L)
        n = len(L)
        if n < 2:
            raise InsufficientPoints(f"need at least 2 transition points to fit {self.formula}, found {n}")
        if not (np.all(np.isfinite(sigma)) and np.all(sigma > 0)):
            raise UserError("transition points have zero or undefined bootstrap error (one seed per cell?): "
                            "add seeds or use --resample pooled+widths")
        if np.ptp(self.g(L, np)) == 0:
            raise UserError("all transition points have the same depth: the slope b is undetermined")
        w = 1.0 / sigma**2
        model = lambda L, a, b: self.ln_width(L, a, b, np)  # noqa: E731
        # Weighted-mean start; the model is linear in (a, b), so curve_fit converges to the exact WLS.
        popt, pcov = curve_fit(model, L, y, p0=(float(np.average(y, weights=w)), 0.0), sigma=sigma,
                               absolute_sigma=absolute)
        a, b = float(popt[0]), float(popt[1])
        return LawFit(a=a, b=b, cov=np.asarray(pcov, dtype=float), form=self,
                      stats=_stats(L, y, sigma, w, y - model(L, a, b), np.asarray(pcov), a, b))

    def fit_replicates(self, L, Y, w):
        """Closed-form WLS (normal equations of a line in g(L)) of every row of Y at once.

        L: depths, shape (n,); Y: ln d_x per replicate, shape (B, n); w: weights 1/σ², shape (n,).
        Returns (a, b), arrays of shape (B,). The bootstrap refit of :mod:`depthwidth.fits.lawfit`.
        """
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        import numpy as np

        x = self.g(np.asarray(L, dtype=float), np)
        S, Sx, Sxx = w.sum(), (w * x).sum(), (w * x * x).sum()
        Sy, Sxy = (Y * w).sum(axis=1), (Y * w * x).sum(axis=1)
        det = S * Sxx - Sx * Sx
        b = (S * Sxy - Sx * Sy) / det
        return (Sy - b * Sx) / S, b


def _stats(L, y, sigma, w, resid, pcov, a: float, b: float) -> dict[str, Any]:
    """chi2, chi2_red, weighted and unweighted R², Birge-scaled covariance, stderr, normal 95%
    intervals and depth range of a fitted line (formulas in :mod:`depthwidth.fits.lawfit`)."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    n = len(L)
    dof = n - 2
    stats: dict[str, Any] = {"n_points": n, "dof": dof, "chi2": None, "chi2_red": None,
                             "r2": None, "r2_unweighted": None}
    if dof > 0:
        chi2 = float(np.sum((resid / sigma) ** 2))
        ybar_w = np.average(y, weights=w)
        stats.update(chi2=chi2, chi2_red=chi2 / dof,
                     r2=float(1.0 - np.sum(w * resid**2) / np.sum(w * (y - ybar_w) ** 2)),
                     r2_unweighted=float(1.0 - np.sum(resid**2) / np.sum((y - y.mean()) ** 2)))
        # Birge-ratio scaling (as in the PDG's averages): when the scatter exceeds the stated
        # errors, inflate the covariance by chi2_red. A safeguard for real sweeps whose point
        # errors are too small (e.g. the per-cell seed bootstrap: 87% coverage of a nominal 95%
        # on synthetic sweeps, 97% after scaling; see transitions' docstring).
        stats["cov_scaled"] = (pcov * max(1.0, chi2 / dof)).tolist()
    else:
        stats["cov_scaled"] = None
    z = statistics.NormalDist().inv_cdf(0.975)
    se = np.sqrt(np.diag(pcov))
    stats["stderr"] = {"a": float(se[0]), "b": float(se[1])}
    stats["ci95"] = {"a": [a - z * se[0], a + z * se[0]], "b": [b - z * se[1], b + z * se[1]]}
    stats["depth_range"] = [float(L.min()), float(L.max())]
    return stats


@dataclass
class LawFit:
    """Result of :meth:`LawForm.fit`: a, b, cov (2×2 ndarray), stats dict (n_points, dof, chi2,
    chi2_red, r2, r2_unweighted, cov_scaled, stderr, ci95, depth_range), form."""

    a: float
    b: float
    cov: Any
    stats: dict[str, Any]
    form: LawForm | None = None  # None: the default form

    def to_dict(self) -> dict[str, Any]:
        """The fit file's ``law`` object (format in :mod:`depthwidth.fits.law`)."""
        return {"form": (self.form or LINEAR).formula, "a": self.a, "b": self.b, "cov": self.cov.tolist(),
                **self.stats}


# ---------------------------------------------------------------------------- the forms


class LinearDepth(LawForm):
    """ln d_x = a + b·L (Levine et al. 2020, arXiv 2006.12467 v3, experiments section): the
    transition width grows exponentially with depth. Read as "depth L is optimal at width
    exp(a + b·L)", N(L) = 12·L·exp(2a + 2b·L). Unique optimum for b > 0."""

    key = "linear-depth"
    formula = "ln(d_x) = a + b*L"
    term = term_pretty = "L"
    slope_is_levines = True

    def g(self, L, xp=SCALAR):
        return L

    def depth_upper(self, log_budget, a, b, xp=SCALAR):
        # For L >= 1, ln N(L) >= ln 12 + 2a + 2bL, which exceeds ln B once L > (ln(B/12) - 2a)/(2b).
        return xp.maximum(1.0, (log_budget - _LN12 - 2.0 * a) / (2.0 * b)) + 1.0

    def depth_at_ln_width(self, y, a, b):
        return (y - a) / b if b > 0 else math.inf


class LogDepth(LawForm):
    """ln d_x = a + b·ln L: a power law d_x = e^a·L^b in depth (the alternative to Levine et al.
    2020's exponential). N(L) = 12·e^(2a)·L^(1+2b), so without embeddings the optimal depth for
    a budget B is (B/(12·e^(2a)))^(1/(1+2b)), unique for b > -1/2; with V·d_x = V·e^a·L^b of
    embeddings that term must not fall, b >= 0."""

    key = "log-depth"
    formula = "ln(d_x) = a + b*ln(L)"
    term = "ln(L)"
    term_pretty = "ln L"
    slope_rule = "b > -1/2 (b >= 0 with embeddings)"

    def g(self, L, xp=SCALAR):
        return xp.log(L)

    def unique_optimum(self, b, vocab=0.0):
        return (b > -0.5) & ((vocab <= 0) | (b >= 0))

    def depth_upper(self, log_budget, a, b, xp=SCALAR):
        # ln N(L) = ln 12 + 2a + (1+2b)·ln L exactly; past e^700 the depth is no longer a float
        # worth solving for (a slope near -1/2 there leaves the sample without a root).
        ln_hi = (log_budget - _LN12 - 2.0 * a) / (1.0 + 2.0 * b)
        return xp.exp(xp.minimum(xp.maximum(ln_hi, 0.0), 700.0)) + 1.0

    def depth_at_ln_width(self, y, a, b):
        if b <= 0:
            return math.inf
        ln_L = (y - a) / b
        return math.exp(ln_L) if ln_L < 700.0 else math.inf


LINEAR = LinearDepth()
FORMS: dict[str, LawForm] = {f.key: f for f in (LINEAR, LogDepth())}
DEFAULT_FORM = LINEAR.key


def form_named(key: str) -> LawForm:
    """The form a ``--law-form`` names; UserError (one line) for an unknown one."""
    try:
        return FORMS[key]
    except KeyError:
        raise UserError(f"--law-form must be one of {', '.join(FORMS)}, got {key!r}") from None


def form_of_formula(formula: Any, source: str) -> LawForm:
    """The form whose ``formula`` a fit file stores in ``law.form``; a fit file without one is
    the linear form (the only one before forms existed). UserError for any other string."""
    if formula is None:
        return LINEAR
    for f in FORMS.values():
        if f.formula == formula:
            return f
    known = "; ".join(f"{f.formula!r} ({f.key})" for f in FORMS.values())
    raise UserError(f"{source}: unknown law form {formula!r} (known: {known})")
