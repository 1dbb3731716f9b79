"""Projections from a law ``ln d_x = a + b·g(L)`` (of any form in :mod:`depthwidth.fits.forms`;
g(L) = L by default): optimal shape for a budget, transition size of a depth, verdict on a
shape, rounded hardware-friendly shapes, and confidence intervals.

Formulas (Levine et al. 2020, arXiv 2006.12467 v3, with Kaplan et al. 2020's non-embedding
count N = 12·L·d_x²; L in layers, d_x in units of width, N and V·d_x in parameters):

    width at which depth L is optimal          d(L) = exp(a + b·g(L))      (default: exp(a + b·L))
    size at which depth L is optimal           N(L) = 12·L·d(L)²           (12·L·exp(2a + 2b·L))
    with an embedding table of V rows          N_tot(L) = N(L) + V·d(L)
    optimal depth for a budget B               the root L* of N_tot(L) = B   (V = 0: B = N)

Where the form's slope rule holds (``LawForm.unique_optimum``; b > 0 for the default form, every
term then grows), ln N_tot(L) is strictly increasing in L, so the root is unique and found by a
bracketed root finder (mpmath's Anderson-Björck) on ``ln N_tot(L) - ln B`` inside the form's
bracket (``LawForm.depth_upper``). A law outside its slope rule has no unique optimal depth;
projections from it raise UserError.

Every query answers only inside the law's answerable range (:func:`answerable`; docs/guide/query.md,
"What query answers"): budgets from the size at which one layer is optimal up to :data:`MAX_BUDGET`
(1e15 parameters) and up to the size at which the optimal depth is :data:`MAX_DEPTH_FACTOR` x the
law's deepest fitted depth; a depth (``query_depth``) or a shape (``query_shape``) is held to the
same range through the law. Outside it they raise UserError naming the limit.

Confidence intervals: (a, b) ~ Normal(mean, cov) sampled by Monte Carlo with a fixed seed
(default 4,000 samples, seed 0), every sample projected exactly (a vectorised bisection in
numpy on the same bracket, to 1e-12 relative), and the central percentile interval taken.
Monte Carlo rather than the delta method because the projections are exponential in b and the
intervals are visibly asymmetric far outside the fitted depth range. Samples outside the slope rule (or a
budget below the embedding cost) have no solution; their share is reported as
``valid_fraction`` and no interval is given if it is below the confidence level. A law without
covariance (``levine2020``) gets ``ci: null`` and a ``ci_note`` saying why.

Only ``math`` and ``statistics`` load at import; mpmath (point estimates) and numpy (intervals)
are imported inside the functions that need them, and scipy not at all, so ``depthwidth query``
stays fast, with a fit's intervals too.
"""

from __future__ import annotations

import math
from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits.forms import LINEAR, LawForm
from depthwidth.fits.law import Law
from depthwidth.theory.accounting import kaplan_n, stack_n
from depthwidth.units import abbreviate, format_count, format_level

# Near optimal when the depth is within ±10 % (multiplicatively) of the optimal depth: about one
# layer at L ≈ 10 and well inside the factor-2 spacing of the doubling pairs that locate the law.
DEFAULT_TOLERANCE = 0.1
DEFAULT_SAMPLES = 4000
DEFAULT_SEED = 0
DEFAULT_LEVEL = 0.95
_L_MIN = 1e-6  # lower end of the depth bracket (layers); any budget > 0 with V = 0 lies above it


# ln of the largest width a projection reports: e^300 ≈ 2e130, far past any model yet still a
# float whose square (the size 12·L·d²) does not overflow.
_MAX_LN_WIDTH = 300.0

# The answerable range: one policy for every law and every query (--params, --layers, --shape).
# A law is asked only where its answer is a model someone could build from the evidence behind it:
#   from the size at which one layer is optimal (no network has fewer layers),
#   up to MAX_BUDGET = 1e15 parameters: 1,000x the 1T to which Levine et al. 2020 (arXiv 2006.12467,
#     abstract) extrapolate their law fitted on depths 6-48. At 1e15 that law's optimal depth is
#     153 layers, 3x its deepest trained network; further out the answer is the line stretched past
#     any evidence (1e30 gave 454 layers x 1.4e13 wide), so it is refused;
#   and up to the budget at which the law's optimal depth is MAX_DEPTH_FACTOR x the deepest depth
#     it was fitted on (law.depth_range). The budget limit alone does not bound a fitted law's depth:
#     a log-depth fit on depths 1.4-5.7 put 183,394 layers at 1e15. 100x (566 layers for a fit
#     ending at 5.66) still answers the CPU fits at realistic sizes (1.3B: 25 layers linear, 310
#     log-depth), whose rows are marked extrapolated; for levine2020 (4,800 layers) it never binds.
MAX_BUDGET = 1e15
MAX_DEPTH_FACTOR = 100.0
_SLACK = 1e-12  # relative: a limit named in a message (or computed by a root finder) is accepted


def _count_text(x: float) -> str:
    """A budget for a message: a whole count below 1e15 with thousands separators (exact, so the
    limit a message names is not rounded onto the refused budget: 319,307 vs 319,300), from 1e15
    on in scientific notation without trailing zeros (1e+15, 1.0001e+15), else the float's
    shortest repr (0.001, 5e-324, 319306.5)."""
    x = float(x)
    if x.is_integer() and abs(x) < MAX_BUDGET:
        return f"{int(x):,}"
    if abs(x) >= MAX_BUDGET and "e" not in repr(x):  # 1e15 <= x < 1e16: repr writes all the digits
        mantissa, _, exponent = f"{x:.16e}".partition("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"
    return repr(x)


def _depths_text(law: Law) -> str:
    lo, hi = law.depth_range  # type: ignore[misc]
    return f"{lo:.3g}-{hi:.3g}"


def answerable(law: Law, vocab: float = 0) -> dict[str, Any]:
    """The budgets (parameters; the total N + V·d_x with ``vocab``) and depths (layers) a query of
    ``law`` answers (the policy above): {"min_budget", "max_budget", "depth_cap"}.

    min_budget = N_tot(1 layer); max_budget = min(MAX_BUDGET, N_tot(depth_cap)) with depth_cap =
    MAX_DEPTH_FACTOR x the law's deepest fitted depth (None without a depth_range). No root is
    solved: a query pays two evaluations of the law for it.
    """
    ln_max = math.log(MAX_BUDGET)
    cap = MAX_DEPTH_FACTOR * law.depth_range[1] if law.depth_range else None
    unique = law.form.unique_optimum(law.b, vocab)
    if cap is not None and unique:
        ln_max = min(ln_max, _log_budget(cap, law.a, law.b, vocab, law.form))
    return {"min_budget": math.exp(_log_budget(1.0, law.a, law.b, vocab, law.form)),
            "max_budget": math.exp(ln_max), "depth_cap": cap}


def _largest(law: Law, lim: dict[str, Any]) -> str:
    """'the largest budget law X answers, N parameters: why' (the reason worded per law)."""
    head = f"the largest budget law {law.name} answers, "
    tail = "; further out the depth and width would be the line stretched past any evidence"
    if lim["max_budget"] < MAX_BUDGET * (1 - _SLACK):
        return (head + f"{_count_text(math.floor(lim['max_budget']))} parameters: there its optimal depth is "
                f"{lim['depth_cap']:,.4g} layers, {MAX_DEPTH_FACTOR:g}x the deepest it was fitted on (depths "
                f"{_depths_text(law)})" + tail)
    if law.name == "levine2020":
        why = f"1,000x the 1T to which Levine et al. 2020 extrapolate it from depths {_depths_text(law)}"
    else:
        why = ("the limit of every law, 1,000x the 1T to which Levine et al. 2020 extrapolate theirs; this one "
               + (f"was fitted on depths {_depths_text(law)}" if law.depth_range else "records no fitted depths"))
    return head + f"{MAX_BUDGET:.0e} parameters: " + why + tail


def _smallest(law: Law, lim: dict[str, Any], vocab: float) -> str:
    return (f"the smallest budget law {law.name} answers, {_count_text(math.ceil(lim['min_budget']))} parameters"
            + (f" with vocab {vocab:g}" if vocab else "")
            + ": the size at which one layer is optimal (no network has fewer layers)")


def check_budget(budget: float, law: Law, vocab: float = 0, subject: str | None = None) -> None:
    """Raise UserError (one line) unless ``budget`` (parameters) lies in :func:`answerable`'s range,
    or if ``law`` is outside its slope rule. ``subject`` names what is checked in the message
    (default "budget <budget>")."""
    if not (budget > 0 and math.isfinite(budget)):
        raise UserError(f"budget must be a positive finite number of parameters, got {budget!r}")
    if not law.form.unique_optimum(law.b, vocab):
        raise UserError(f"law {law.name} has slope b = {law.b:g}, outside {law.form.slope_rule}: "
                        "the optimal depth is not unique")
    subject = subject or f"budget {_count_text(budget)}"
    lim = answerable(law, vocab)
    if budget < lim["min_budget"] * (1 - _SLACK):
        raise UserError(f"{subject} is below {_smallest(law, lim, vocab)}")
    if budget > lim["max_budget"] * (1 + _SLACK):
        raise UserError(f"{subject} is above {_largest(law, lim)}")


def check_answerable_depth(L: float, law: Law, vocab: float = 0, subject: str | None = None) -> None:
    """Raise UserError (one line) if the size at which depth ``L`` (layers) is optimal lies above
    :func:`answerable`'s largest budget, or L is past its depth cap: the same limit as for a
    budget, read through the law. Names the deepest depth answered (rounded down to 0.01)."""
    lim = answerable(law, vocab)
    ln_n = _log_budget(L, law.a, law.b, vocab, law.form)
    capped = lim["depth_cap"] is not None and L > lim["depth_cap"] * (1 + _SLACK)
    if ln_n > math.log(lim["max_budget"] * (1 + _SLACK)) or capped:
        size = f"optimal at {math.exp(ln_n):.4g} parameters" if ln_n < 700 else f"optimal at e^{ln_n:.4g} parameters"
        # the optimal depth at the largest budget; a law outside its slope rule has none: its cap
        deepest = (optimal_depth(lim["max_budget"], law, vocab) if law.form.unique_optimum(law.b, vocab)
                   and lim["max_budget"] > lim["min_budget"] else lim["depth_cap"])
        raise UserError(f"{subject or f'depth {L:g}'} ({size}) is above {_largest(law, lim)}"
                        + (f"; the deepest depth it answers is {math.floor(deepest * 100) / 100:.2f} layers"
                           if deepest is not None else ""))


def _deepest(law: Law) -> str:
    """The deepest depth whose width stays below e^300, as text (a whole number of layers)."""
    deepest = law.form.depth_at_ln_width(_MAX_LN_WIDTH, law.a, law.b)
    return f"{math.floor(deepest):,}" if math.isfinite(deepest) else "any"


def check_depth(L: float, law: Law) -> None:
    """Raise UserError (one line) if depth ``L`` is so far outside ``law``'s range that its width
    exp(ln d_x(L)) overflows (ln d > 300): there is no meaningful answer to give."""
    if law.ln_width(L) > _MAX_LN_WIDTH:
        raise UserError(f"depth {L:g} is far outside law {law.name}'s range: its width exp(a + b*{law.form.term}) = "
                        f"e^{law.ln_width(L):.4g} overflows; give a depth up to {_deepest(law)} layers")


def law_width(L: float, law: Law) -> float:
    """Width d(L) = exp(a + b·g(L)) at which depth L (layers) is optimal (default form: exp(a + b·L),
    the Levine et al. 2020 fit)."""
    return math.exp(law.ln_width(L))


def transition_params(L: float, law: Law) -> float:
    """Non-embedding size N(L) = 12·L·d(L)² (parameters) at which depth L is optimal (default form:
    12·L·exp(2a + 2b·L))."""
    return 12.0 * L * math.exp(2.0 * law.ln_width(L))


def _log_budget(L: float, a: float, b: float, vocab: float, form: LawForm) -> float:
    """ln N_tot(L) = ln(12·L·d² + V·d), in log space so large L cannot overflow."""
    return form.ln_size(L, a, b, vocab)


def optimal_depth(budget: float, law: Law, vocab: float = 0) -> float:
    """Optimal depth L* (layers, float) for a budget (parameters): root of N_tot(L) = budget.

    budget is the non-embedding N when vocab == 0, else the total N + V·d_x. Raises UserError if
    budget <= 0, if law.b is outside its form's slope rule (no unique root; default form:
    b <= 0), or if the budget does not exceed the embedding cost V·d(L) even at vanishing depth.
    """
    # mpmath's bracketed solver, not scipy.optimize.brentq: the same root (the function is
    # monotone on the bracket), and importing scipy.optimize alone costs ~0.5-0.9 s, which would
    # make `depthwidth query` slow to answer (measured with python -X importtime).
    import mpmath

    if not (budget > 0 and math.isfinite(budget)):
        raise UserError(f"budget must be a positive finite number of parameters, got {budget!r}")
    if not law.form.unique_optimum(law.b, vocab):
        raise UserError(f"law {law.name} has slope b = {law.b:g}, outside {law.form.slope_rule}: "
                        "the optimal depth is not unique")
    log_b = math.log(budget)
    lo = _L_MIN
    if _log_budget(lo, law.a, law.b, vocab, law.form) >= log_b:
        raise UserError(f"budget {budget:.4g} is too small for law {law.name}"
                        + (f" with vocab {vocab:g} (embedding {vocab:g}*d_x alone exceeds it)" if vocab else ""))
    hi = law.form.depth_upper(log_b, law.a, law.b)
    f = lambda L: _log_budget(float(L), law.a, law.b, vocab, law.form) - log_b  # noqa: E731
    return float(mpmath.findroot(f, (lo, hi), solver="anderson", tol=1e-24))


def optimal_width(budget: float, law: Law, vocab: float = 0) -> float:
    """Width d(L*) = exp(a + b·g(L*)) at the optimal depth for ``budget`` (same errors as optimal_depth)."""
    return law_width(optimal_depth(budget, law, vocab), law)


def _lcm(x: int, y: int) -> int:
    return x * y // math.gcd(x, y)


# How far from the budget a rounded shape may be and still count as keeping it (a choice of this
# project: the x128 grid of depths near the optimum nearly always has a shape this close; the
# papers round by hand).
BUDGET_BAND = 0.025


def _spent(n_layer: int, d_model: int, vocab: float) -> float:
    return float(kaplan_n(n_layer, d_model)) + vocab * d_model


def _width_at(n: float, budget: float, vocab: float) -> float:
    """The width that spends ``budget`` at depth n: the positive root of 12·n·d² + V·d = budget."""
    return (-vocab + math.sqrt(vocab * vocab + 48.0 * n * budget)) / (24.0 * n)


def _candidates(budget: float, depth: float, vocab: float, multiple: int, tolerance: float):
    """(n_layer, d_model) near the optimum: every whole depth the shape verdict calls near optimal
    (|ln(n/depth)| <= ln(1 + tolerance)) and the two whole depths around ``depth``, each with the
    two multiples of ``multiple`` around the width that spends ``budget`` there (at least one
    multiple) and every multiple whose size is within :data:`BUDGET_BAND` of it."""
    band = math.log1p(tolerance)
    lo, hi = max(1, math.floor(depth / (1 + tolerance))), math.ceil(depth * (1 + tolerance))
    depths = {n for n in range(lo, hi + 1) if abs(math.log(n / depth)) <= band}
    depths |= {max(1, math.floor(depth)), max(1, math.ceil(depth))}
    for n in sorted(depths):
        k_lo = math.floor(_width_at(n, budget * (1 - BUDGET_BAND), vocab) / multiple)
        k_hi = math.ceil(_width_at(n, budget * (1 + BUDGET_BAND), vocab) / multiple)
        for k in range(max(1, k_lo), max(1, k_hi) + 1):
            yield n, k * multiple


def rounded_shape(budget: float, depth: float, vocab: float = 0, multiple: int = 128,
                  tolerance: float = DEFAULT_TOLERANCE, width: float | None = None) -> dict[str, Any]:
    """Hardware-friendly shape near the optimum that keeps the budget (docs/guide/query.md).

    Candidates (:func:`_candidates`): the whole depths within ``tolerance`` of the optimal
    ``depth`` (the band ``query --shape`` calls near optimal) and the two around it, each with
    the multiples of ``multiple`` around and near the width that spends ``budget`` there. Rule
    "nearest the budget and d/L within 2.5% of the budget": of the candidates whose size is within
    :data:`BUDGET_BAND` of ``budget``, the one with the smallest sum |ln(size/budget)| +
    |ln((d/L)/(d/L)*)|, its distances from the budget and from the optimal aspect ratio
    (d/L)* = ``width``/``depth``, in log, weighted alike (ties: nearer the budget). Rule "closest to
    the budget": when none is that close, the candidate nearest the budget (ties: nearer d/L).
    ``width`` defaults to the width that spends the budget at ``depth``.

    Returns n_layer, d_model, multiple, its non-embedding (Kaplan and exact) counts (and total
    with ``vocab``), budget_rel_error = (its budget-comparable count - budget) / budget,
    aspect_ratio, rule (the rule's name), depths_searched [lo, hi] and budget_band.
    Raises UserError for a multiple < 1.
    """
    if multiple < 1:
        raise UserError(f"width multiple must be >= 1, got {multiple}")
    if width is None:
        width = _width_at(depth, budget, vocab)
    ln_ar = math.log(width / depth)
    # (n, d, relative size error, |ln(size/budget)|, |ln(d/n) - ln(width/depth)|)
    cands = [(n, d, e, abs(math.log1p(e)), abs(math.log(d / n) - ln_ar))
             for n, d in _candidates(budget, depth, vocab, multiple, tolerance)
             for e in [_spent(n, d, vocab) / budget - 1]]
    near = [c for c in cands if abs(c[2]) <= BUDGET_BAND]
    if near:
        n_layer, d_model, err, _, _ = min(near, key=lambda c: (c[3] + c[4], c[3]))
        rule = f"nearest the budget and d/L within {BUDGET_BAND:.1%} of the budget"
    else:
        n_layer, d_model, err, _, _ = min(cands, key=lambda c: (c[3], c[4]))
        rule = "closest to the budget"
    out = {
        "n_layer": n_layer,
        "d_model": d_model,
        "multiple": multiple,
        "non_embedding_params": float(kaplan_n(n_layer, d_model)),  # floats, as for real-valued shapes
        "non_embedding_params_exact": float(stack_n(n_layer, d_model)),
        "budget_rel_error": err,
        "aspect_ratio": d_model / n_layer,
        "rule": rule,
        "depths_searched": [min(c[0] for c in cands), max(c[0] for c in cands)],
        "budget_band": BUDGET_BAND,
    }
    if vocab:
        out["total_params"] = _spent(n_layer, d_model, vocab)
    return out


# ---------------------------------------------------------------- Monte Carlo intervals


def sample_laws(law: Law, n: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED):
    """(a, b) samples, two arrays of shape (n,), from Normal((a, b), cov); None if cov is None."""
    if law.cov is None:
        return None
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    rng = np.random.default_rng(seed)
    ab = rng.multivariate_normal([law.a, law.b], np.asarray(law.cov, dtype=float), size=n, method="eigh")
    return ab[:, 0], ab[:, 1]


def optimal_depth_samples(budget: float, a, b, vocab: float = 0, form: LawForm = LINEAR):
    """Vectorised optimal depth for arrays a, b (shape (n,)) of ``form`` (default: ln d_x = a + b·L);
    NaN where no root exists (b outside the form's slope rule, or budget below the embedding
    cost). Same bracket and equation as :func:`optimal_depth`."""
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    log_b = math.log(budget)

    def g(L, a, b):
        return form.ln_size(L, a, b, vocab, np) - log_b

    ok = np.asarray(form.unique_optimum(b, vocab))
    bs = np.where(ok, b, 1.0)  # placeholder slope keeps the bracket finite for rows dropped below
    lo = np.full_like(a, _L_MIN)
    hi = form.depth_upper(log_b, a, bs, np)
    ok &= (g(lo, a, bs) < 0) & (g(hi, a, bs) >= 0)
    return np.where(ok, _bisect(g, lo, hi, a, bs), np.nan)


def _bisect(g, lo, hi, *args):
    """The root of g(L, *args) = 0 in each bracket [lo, hi] (arrays of shape (n,)), by bisection
    until every bracket is narrower than 1e-12 of its upper end (~40-70 halvings here), for g
    increasing where g(lo) < 0 <= g(hi); other rows come back as some point of their bracket.

    Bisection in numpy, not ``scipy.optimize.elementwise.find_root``: the same roots to 1e-12
    (g is monotone on the bracket), and importing scipy.optimize costs ~0.84 s (best of 3,
    measured on the 2-core dev machine), which made ``query --fit`` take ~1.4 s against the
    0.5 s the CLI keeps to (ARCHITECTURE.md, "Start-up").
    """
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    lo, hi = np.array(lo, dtype=float), np.array(hi, dtype=float)
    for _ in range(200):  # float64 halves a bracket at most ~1100 times; 200 is past 1e-12 from 1e6
        mid = 0.5 * (lo + hi)
        below = g(mid, *args) < 0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        if np.all(hi - lo <= 1e-12 * np.abs(hi)):
            break
    return 0.5 * (lo + hi)


def _interval(samples, level: float) -> tuple[list[float] | None, float]:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    finite = np.isfinite(samples)
    frac = float(finite.mean())
    if frac < level:
        return None, frac
    q = (1.0 - level) / 2.0
    # Samples without a root count as "beyond every finite value" would bias the interval; with
    # valid_fraction >= level they are few, and the interval is over the solvable samples.
    lo, hi = np.quantile(samples[finite], [q, 1.0 - q])
    return [float(lo), float(hi)], frac


def _ci_header(law: Law, level: float, n: int, seed: int) -> dict[str, Any]:
    return {"level": level, "method": f"monte carlo over (a, b) ~ Normal(mean, cov), n={n}, seed={seed}"}


# ---------------------------------------------------------------- the three queries


def _extrapolated(law: Law, depth: float) -> bool | None:
    if law.depth_range is None:
        return None
    return not (law.depth_range[0] <= depth <= law.depth_range[1])


def _width_multiple(round_width: int, n_head: int | None, width: float) -> int:
    m = round_width
    while True:
        multiple = _lcm(m, n_head) if n_head else m
        if m == 1 or multiple <= width / 4.0:
            return multiple
        m //= 2


def query_budget(budget: float, law: Law, *, vocab: float = 0, round_width: int = 128,
                 n_head: int | None = None, tolerance: float = DEFAULT_TOLERANCE, level: float = DEFAULT_LEVEL,
                 samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Optimal depth and width for a budget (parameters), with CI and a rounded shape
    (:func:`rounded_shape`, searched over the depths within ``tolerance`` of the optimal).

    With vocab == 0 the budget is the non-embedding N = 12·L·d²; with vocab = V it is the total
    N + V·d_x. The rounded width is a multiple of lcm(m, n_head), where m is ``round_width``
    halved (down to 1) while lcm(m, n_head) exceeds a quarter of the optimal width: a x128
    rounding of a 50-wide model would change its size several-fold, and rounding to a quarter of
    the width keeps it within about ±25% (a choice of this project, not of the papers; the
    multiple used is ``rounded.multiple``). Keys: budget, vocab,
    optimal_depth, optimal_width (unrounded floats), non_embedding_params(_exact),
    embedding_params, aspect_ratio (d/L), ci ({level, method, valid_fraction, optimal_depth,
    optimal_width} or null), ci_note, rounded (see rounded_shape), extrapolated, law.
    Raises UserError as optimal_depth does, and (:func:`check_budget`) for a budget outside
    :func:`answerable`'s range: under the size at which one layer is optimal, above
    :data:`MAX_BUDGET` (1e15 parameters), or where the optimal depth would pass
    :data:`MAX_DEPTH_FACTOR` x the law's deepest fitted depth; and for an ``n_head`` above the
    optimal width (a head of less than one dimension).
    """
    check_budget(budget, law, vocab)
    depth = optimal_depth(budget, law, vocab)
    width = law_width(depth, law)
    if n_head and n_head > width:  # the rounded width would be n_head itself, a shape far off the budget
        raise UserError(f"--n-head {abbreviate(n_head)} is more than the optimal width {width:,.0f} at budget "
                        f"{format_count(budget)}: "
                        "each head needs at least one of the width's dimensions (d_model = n_head x head_dim)")
    multiple = _width_multiple(round_width, n_head, width)
    out: dict[str, Any] = {
        "law": law.name,
        "budget": budget,
        "budget_kind": "total = 12*L*d^2 + vocab*d" if vocab else "non-embedding 12*L*d^2",
        "vocab": vocab,
        "optimal_depth": depth,
        "optimal_width": width,
        "non_embedding_params": kaplan_n(depth, width),
        "non_embedding_params_exact": stack_n(depth, width),
        "embedding_params": vocab * width,
        "aspect_ratio": width / depth,
        "ci": None,
        "ci_note": law.ci_note,
        "rounded": rounded_shape(budget, depth, vocab, multiple, tolerance, width),
        "extrapolated": _extrapolated(law, depth),
    }
    if n_head:
        out["rounded"]["n_head"] = n_head
        out["rounded"]["head_dim"] = out["rounded"]["d_model"] // n_head
    ab = sample_laws(law, samples, seed)
    if ab is not None:
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        import numpy as np

        a, b = ab
        Ls = optimal_depth_samples(budget, a, b, vocab, law.form)
        ds = np.exp(law.form.ln_width(Ls, a, b, np))
        ci = _ci_header(law, level, samples, seed)
        ci["optimal_depth"], ci["valid_fraction"] = _interval(Ls, level)
        ci["optimal_width"], _ = _interval(ds, level)
        out["ci"], out["ci_note"] = ci, None
        if ci["optimal_depth"] is None:
            out["ci_note"] = (f"no {format_level(level)} interval: only {ci['valid_fraction']:.1%} of the (a, b) samples have a "
                              f"solution (a slope outside {law.form.slope_rule} is likely)")
    return out


def query_depth(depth: float, law: Law, *, vocab: float = 0, level: float = DEFAULT_LEVEL,
                samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Size at which ``depth`` (layers) is optimal: transition_params N(L) = 12·L·d(L)² (default
    form: 12·L·exp(2a+2bL); non-embedding), transition_width d(L), and with vocab the total
    N(L) + V·d(L). Raises UserError (:func:`check_answerable_depth`) where that size is above the
    largest budget :func:`query_budget` answers."""
    if not (depth > 0 and math.isfinite(depth)):
        raise UserError(f"depth must be positive, got {depth!r}")
    check_answerable_depth(depth, law, vocab)
    check_depth(depth, law)
    width = law_width(depth, law)
    out: dict[str, Any] = {
        "law": law.name,
        "n_layer": depth,
        "transition_params": transition_params(depth, law),
        "transition_width": width,
        "ci": None,
        "ci_note": law.ci_note,
        "extrapolated": _extrapolated(law, depth),
    }
    if vocab:
        out["vocab"] = vocab
        out["transition_params_total"] = out["transition_params"] + vocab * width
    ab = sample_laws(law, samples, seed)
    if ab is not None:
        # numpy: ~0.1 s at import; kept off the modules that do not need it
        import numpy as np

        a, b = ab
        ci = _ci_header(law, level, samples, seed)
        g = law.form.g(depth)
        ci["transition_params"], ci["valid_fraction"] = _interval(12.0 * depth * np.exp(2 * a + 2 * b * g), level)
        ci["transition_width"], _ = _interval(np.exp(a + b * g), level)
        out["ci"], out["ci_note"] = ci, None
    return out


def classify(depth: float, optimal: float, tolerance: float = DEFAULT_TOLERANCE) -> str:
    """'too deep' if depth > optimal·(1+tol), 'too wide' if depth < optimal/(1+tol), else
    'near optimal' (a multiplicative band: |ln(depth/optimal)| <= ln(1+tol))."""
    if not tolerance > 0:
        raise UserError(f"tolerance must be > 0, got {tolerance!r}")
    r = math.log(depth / optimal)
    band = math.log1p(tolerance)
    if r > band:
        return "too deep"
    if r < -band:
        return "too wide"
    return "near optimal"


def query_shape(depth: float, width: float, law: Law, *, vocab: float = 0,
                tolerance: float = DEFAULT_TOLERANCE, level: float = DEFAULT_LEVEL,
                samples: int = DEFAULT_SAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """Verdict on a shape (L layers, d_x width) against the law at the shape's own budget.

    The budget is 12·L·d² (+ V·d with vocab); optimal_depth is the law's optimum at it,
    depth_ratio = L / optimal_depth, verdict from :func:`classify` (too deep: widen; too wide:
    deepen). Also law_width_at_depth = d(L) and width_ratio = d / that. With a
    covariance, ci gives intervals for optimal_depth and depth_ratio, and ``verdict_robust``
    says whether the whole depth_ratio interval lies outside the tolerance band on the same side.
    Raises UserError where the shape's budget, or its depth, is outside :func:`answerable`'s range.
    """
    if not (depth > 0 and width > 0 and math.isfinite(depth) and math.isfinite(width)):
        raise UserError(f"shape must have positive depth and width, got {depth!r} x {width!r}")
    n_ne = kaplan_n(depth, width)
    budget = n_ne + vocab * width
    # the verdict reads the law at the shape's budget and at its depth: both must be answerable
    shape = f"shape {depth:g}x{width:g}"
    check_budget(budget, law, vocab, f"{shape} ({_count_text(budget)} parameters)")
    check_answerable_depth(depth, law, vocab, f"{shape}: depth {depth:g}")
    check_depth(depth, law)
    opt = optimal_depth(budget, law, vocab)
    out: dict[str, Any] = {
        "law": law.name,
        "n_layer": depth,
        "d_model": width,
        "vocab": vocab,
        "non_embedding_params": n_ne,
        "non_embedding_params_exact": stack_n(depth, width),
        "budget": budget,
        "optimal_depth": opt,
        "optimal_width": law_width(opt, law),
        "depth_ratio": depth / opt,
        "law_width_at_depth": law_width(depth, law),
        "width_ratio": width / law_width(depth, law),
        "tolerance": tolerance,
        "verdict": classify(depth, opt, tolerance),
        "ci": None,
        "ci_note": law.ci_note,
        "extrapolated": _extrapolated(law, opt),
    }
    ab = sample_laws(law, samples, seed)
    if ab is not None:
        a, b = ab
        Ls = optimal_depth_samples(budget, a, b, vocab, law.form)
        ci = _ci_header(law, level, samples, seed)
        ci["optimal_depth"], ci["valid_fraction"] = _interval(Ls, level)
        ci["depth_ratio"], _ = _interval(depth / Ls, level)
        if ci["depth_ratio"] is not None:
            lo, hi = ci["depth_ratio"]
            band = 1.0 + tolerance
            ci["verdict_robust"] = (lo > band) or (hi < 1.0 / band) or (1.0 / band <= lo and hi <= band)
        out["ci"], out["ci_note"] = ci, None
    return out
