"""Measured separation rank: the grid-tensor rank of tiny self-attention networks, exactly.

The *analysed network* of Levine et al. 2020 (arXiv 2006.12467, §3 and App. B; docs/concepts.md) is
a stack of L multi-head self-attention layers with the softmax, LayerNorm and feed-forward
activations removed. Layer l maps the positions' vectors x_1..x_N (width d_x) to

    y_i = [x_i +] Σ_h W_O^{l,h} Σ_j <W_Q^{l,h} x_i, W_K^{l,h} x_j> W_V^{l,h} x_j

with H heads of size d_a = d_x / H (W_Q, W_K, W_V: d_a × d_x; W_O: d_x × d_a) and the bracketed
residual term optional. Each layer is a cubic polynomial of its input, so the output is a
polynomial of degree 3^L. The function measured here is f(x_1..x_N) = coordinate 0 of the last
layer's output at position 0.

Grid tensor (the paper's App. B): pick M template vectors t_1..t_M; A[i_1..i_N] = f(t_{i_1}, ...,
t_{i_N}). Matricised across a balanced partition (P, Q) of the positions (rows: the P indices,
columns: the Q indices), its rank is a lower bound on the separation rank of f w.r.t. (P, Q).

Exactness. Float SVD ranks of these matrices fail already at L = 3 (entries span dozens of
orders of magnitude). Here weights and templates are random integers, so every entry is an exact
integer (Python ints, no overflow), and the rank is computed over the rationals by FLINT
(``python-flint``: ``fmpz_mat.rank``, fraction-free elimination) -- exact for the weights drawn,
not probabilistic. A float64 SVD rank (tolerance max(shape)·eps·σ_max, numpy's default) is kept
as a cross-check, and :func:`grid_rank` reports whether the two agree.

Generic rank, and the bound relied on. What is wanted is the *generic* rank r* of the grid
matrix A(W) on the given templates: its rank for all weights W outside a proper algebraic subset
(r* = max_W rank A(W)); the rank at any one W is <= r*, so a measurement can only fall short. Each
entry of A(W) is a polynomial in the weights of total degree <= D_L = 2(3^L - 1) (layer l's
output has weight degree D_l = 4 + 3 D_{l-1}, D_0 = 0; the residual term only adds lower
degrees), so some r* x r* minor of A is a nonzero polynomial in W of degree <= r*·D_L. By the
Schwartz-Zippel lemma, weights drawn independently and uniformly from the 2R + 1 integers in
[-R, R] make that minor vanish -- the only way to measure less than r* -- with probability

    P(rank A(W) < r*) <= r*·D_L / (2R + 1) <= min(shape)·D_L / (2R + 1),

and :func:`generic_rank` takes the best of k independent weight draws *on the same templates*,
so it falls short of r* with probability <= (min(shape)·D_L / (2R + 1))^k (``miss_bound`` in
:func:`measure`'s result). With R = :data:`WEIGHT_RANGE` = 2^20 and k = 2 that is <= 1.1e-5 for
L <= 3 with M <= 128 (per draw <= 128·52 / (2^21 + 1) = 3.2e-3) and <= 1e-4 for L = 4 (per draw
<= 128·160 / (2^21 + 1) = 9.8e-3); each table row records its own. Small
ranges are not enough: with weights in [-2, 2] and head size 1 (d_x = 2, H = 2) both draws of
the earlier table landed on the exceptional set (rank 2 instead of 3 at L = 1, 12 instead of 15
at L = 2, 0 -- f ≡ 0 -- instead of 22 at L = 3; ``tests/theory/test_seprank.py``). The larger
integers cost time: the entries have about D_L·log2(R) more bits (~1,000 at L = 3, ~3,200 at
L = 4), which slows the exact evaluation and elimination (measured in the README). Templates stay
small (integers in [-3, 3]): they fix the grid, not the weights' genericity; whether they are
enough is the saturation check below.

When is M large enough? Two caps exist besides the true rank: the number of distinct rows or
columns (f is symmetric in the positions other than 0, so a side of k positions not holding
position 0 has only C(M+k-1, k) distinct index multisets), and too few templates to separate
the function's monomials. The rank is reported as *saturated* when adding ``step`` templates
does not raise it; otherwise it is a lower bound (``saturated`` false).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import numpy as np

from depthwidth.errors import UserError

WEIGHT_RANGE = 2**20  # weights are integers in [-R, R], R = 2^20 (module docstring: the bound)
DRAWS = 2  # weight draws per measurement; the rank is their maximum
TEMPLATE_RANGE = 3  # template entries are integers in [-3, 3]
MAX_GRID = 2_000_000  # evaluations (M^N) refused above this: minutes of exact integer arithmetic
# ... and M^N * 3^L (the entries are degree-3^L polynomials, so their size grows like 3^L):
# measured ~18 s at L=3, M=204, N=2 (1.1M); 2e7 keeps one measurement within minutes.
MAX_WORK = 20_000_000
# Weights (4 d_x^2 per layer) refused above this: d_x = 500 at one layer is already far past any
# exact rank we can compute, and --width 100000 asked numpy for 75 GiB before failing.
MAX_WEIGHTS = 1_000_000


@dataclass(frozen=True)
class Network:
    """Weights of the analysed network: layers[l][h] = (W_Q, W_K, W_V, W_O) as object arrays of
    Python ints, shapes (d_a, d_x), (d_a, d_x), (d_a, d_x), (d_x, d_a). The weights meant are
    those integers divided by ``denominator`` (1: integer weights; e.g. 64 for trained weights
    rounded to multiples of 1/64), so rational weights stay exact integer arithmetic
    (:func:`evaluate`)."""

    layers: tuple
    d_model: int
    n_head: int
    residual: bool
    denominator: int = 1


def random_network(n_layer: int, d_model: int, n_head: int, *, seed: int = 0, residual: bool = False,
                   weight_range: int | None = None) -> Network:
    """Weights drawn uniformly from the integers in [-R, R], R = ``weight_range`` (default
    :data:`WEIGHT_RANGE`; numpy Generator ``seed``). Raises UserError for bad sizes, H not
    dividing d_x or R < 1."""
    if n_layer < 1 or d_model < 1 or n_head < 1:
        raise UserError(f"need layers, width, heads >= 1; got {n_layer}, {d_model}, {n_head}")
    if d_model % n_head:
        raise UserError(f"--heads {n_head} must divide --width {d_model}")
    if 4 * n_layer * d_model**2 > MAX_WEIGHTS:
        raise UserError(f"{n_layer} layer(s) of width {d_model} have {4 * n_layer * d_model**2:,} weights "
                        f"(> {MAX_WEIGHTS:,}); use a smaller width or fewer layers")
    R = WEIGHT_RANGE if weight_range is None else int(weight_range)
    if R < 1:
        raise UserError(f"weight range must be >= 1, got {R}")
    rng = np.random.default_rng(seed)
    da = d_model // n_head

    def w(shape):
        return rng.integers(-R, R + 1, size=shape).astype(object)

    layers = tuple(tuple((w((da, d_model)), w((da, d_model)), w((da, d_model)), w((d_model, da)))
                         for _ in range(n_head)) for _ in range(n_layer))
    return Network(layers, d_model, n_head, residual)


def network_from_arrays(layers, *, residual: bool = False, denominator: int = 1) -> Network:
    """A Network from integer-valued arrays ``layers[l][h] = (W_Q, W_K, W_V, W_O)`` (e.g. trained
    weights times ``denominator``, rounded), whose weights are those integers / ``denominator``.
    Float arrays are kept as they are (a float network, for the float cross-check). Raises
    UserError on inconsistent shapes or a denominator < 1."""
    if int(denominator) != denominator or denominator < 1:
        raise UserError(f"denominator must be a positive integer, got {denominator}")
    conv = []
    for layer in layers:
        heads = []
        for Wq, Wk, Wv, Wo in layer:
            arrs = [np.asarray(a, np.float64) if np.asarray(a).dtype.kind == "f" else np.asarray(a).astype(object)
                    for a in (Wq, Wk, Wv, Wo)]
            if not (arrs[0].shape == arrs[1].shape == arrs[2].shape and arrs[3].shape == arrs[0].shape[::-1]):
                raise UserError("attention weights must be (d_a, d_x) x3 and (d_x, d_a)")
            heads.append(tuple(arrs))
        conv.append(tuple(heads))
    d = conv[0][0][0].shape[1]
    return Network(tuple(conv), d, len(conv[0]), residual, int(denominator))


def evaluate(net: Network, X: np.ndarray) -> np.ndarray:
    """f on a batch: X (E, N, d_x) -> (E,) values (coordinate 0 at position 0), exact for integer
    weights and templates; for ``net.denominator`` g > 1, exactly c·f with one constant c > 0
    for the whole batch (so every rank is f's). Why: with weights K/g each layer's attention
    term is g^-4·A_K(x), so keeping s·x as integers (s = 1 at the input) the next layer's input
    is s' = g^4·s^3 times the true one: s'·y = g^4·s^2·(s·x)·[residual] + A_K(s·x)."""
    g, s = net.denominator, 1
    for layer in net.layers:
        out = 0
        for Wq, Wk, Wv, Wo in layer:
            q, k, v = X @ Wq.T, X @ Wk.T, X @ Wv.T  # (E, N, d_a)
            scores = q @ np.swapaxes(k, 1, 2)  # (E, N, N): <W_Q x_i, W_K x_j>
            out = out + (scores @ v) @ Wo.T
        if net.residual and g > 1:
            X, s = g**4 * s**2 * X + out, g**4 * s**3
        else:  # no residual: the layer is homogeneous, so the scale g^4 s^3 can be dropped
            X = X + out if net.residual else out
    return X[:, 0, 0]


def balanced_partition(n_positions: int, which: int = 0) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The ``which``-th balanced partition (P, Q) of positions 0..N-1 with 0 in P (sorted
    combinations of the other positions). Raises UserError for odd N or an index out of range."""
    if n_positions < 2 or n_positions % 2:
        raise UserError(f"--positions must be even and >= 2, got {n_positions}")
    if 2**n_positions > MAX_GRID:  # two templates already exceed the grid: refused before counting partitions
        raise UserError(f"--positions {n_positions}: even 2 templates give 2^{n_positions} evaluations "
                        f"(> {MAX_GRID:,}); use fewer positions")
    # Counted, not listed: C(N-1, N/2-1) partitions exhaust memory long before N = 100.
    n = math.comb(n_positions - 1, n_positions // 2 - 1)
    if not 0 <= which < n:
        raise UserError(f"partition index must be in 0..{n - 1}")
    P = (0, *next(itertools.islice(itertools.combinations(range(1, n_positions), n_positions // 2 - 1), which, None)))
    return P, tuple(i for i in range(n_positions) if i not in P)


def grid_matrix(net: Network, templates: np.ndarray, partition) -> np.ndarray:
    """The grid tensor matricised across ``partition`` = (P, Q): rows index the templates at P's
    positions, columns at Q's (both in lexicographic order); shape (M^|P|, M^|Q|), object ints."""
    P, Q = partition
    N = len(P) + len(Q)
    M = len(templates)
    if M**N > MAX_GRID:
        raise UserError(f"{M}^{N} = {M**N:,} evaluations exceeds {MAX_GRID:,}; use fewer templates or positions")
    work = M**N * 3 ** len(net.layers)
    if work > MAX_WORK:
        raise UserError(f"{M}^{N} evaluations of a degree-3^{len(net.layers)} polynomial ({work:,} > {MAX_WORK:,}) "
                        "would take hours of exact arithmetic; use fewer layers, templates or positions")
    idx = np.array(list(itertools.product(range(M), repeat=N)))  # row-major over positions 0..N-1
    order = list(P) + list(Q)
    vals = evaluate(net, templates[idx]).reshape((M,) * N)
    return vals.transpose(order).reshape(M ** len(P), M ** len(Q))


def exact_rank(A: np.ndarray) -> int:
    """Rank over the rationals of an integer matrix (FLINT fmpz_mat, exact)."""
    import flint

    if A.size == 0:
        return 0
    return int(flint.fmpz_mat([[int(v) for v in row] for row in A]).rank())


def to_float(A: np.ndarray) -> np.ndarray:
    """A in float64, an integer (object) matrix first divided by one power of two 2^s so that its
    largest entry fits (< 2^1000; exact ints reach ~2^1100 at L = 3 with the default weights), which
    leaves its rank unchanged; entries far below the largest underflow, as float64 would lose them."""
    A = np.asarray(A)
    if A.dtype != object or A.size == 0:
        return np.asarray(A, dtype=np.float64)
    s = max(0, max(abs(int(v)).bit_length() for v in A.flat) - 1000)
    if not s:
        return np.asarray(A, dtype=np.float64)
    d = 1 << s
    return np.array([[int(v) / d for v in row] for row in A], dtype=np.float64).reshape(A.shape)


def float_rank(A: np.ndarray) -> int:
    """numpy.linalg.matrix_rank of A in float64 (:func:`to_float`; the default SVD tolerance): the
    cross-check."""
    return int(np.linalg.matrix_rank(to_float(A)))


def templates_for(n_templates: int, d_model: int, seed: int) -> np.ndarray:
    """M template vectors with integer entries in [-TEMPLATE_RANGE, TEMPLATE_RANGE], (M, d_x)."""
    rng = np.random.default_rng(10_000 + seed)
    return rng.integers(-TEMPLATE_RANGE, TEMPLATE_RANGE + 1, size=(n_templates, d_model)).astype(object)


def distinct_cap(n_templates: int, partition) -> int:
    """Most distinct rows or columns the matricised grid can have: a side holding position 0
    has M^|side| index tuples; the other side, whose positions f treats alike, C(M+k-1, k)."""
    P, Q = partition
    M = n_templates
    return min(M ** len(P), math.comb(M + len(Q) - 1, len(Q)))


@dataclass
class RankResult:
    """One measurement. seed: the templates' seed (from :func:`generic_rank`: the weight draw's
    seed; its templates are the base seed's); rank: exact rank of the grid matrix; rank_float: float64 SVD rank;
    rank_more_templates: exact rank with ``step`` more templates (None if not computed);
    saturated: rank == rank_more_templates; cap: distinct rows/columns (:func:`distinct_cap`)."""

    n_layer: int
    d_model: int
    n_head: int
    n_positions: int
    n_templates: int
    residual: bool
    seed: int
    partition: list
    shape: list
    rank: int
    rank_float: int
    rank_more_templates: int | None
    saturated: bool | None
    cap: int
    float_agrees: bool

    def to_dict(self) -> dict:
        return asdict(self)


def grid_rank(net: Network, *, n_positions: int = 4, n_templates: int = 8, seed: int = 0, partition: int = 0,
              step: int = 2, n_layer: int | None = None) -> RankResult:
    """Exact grid-tensor rank of ``net`` (module docstring) with M = ``n_templates`` templates and,
    when ``step`` > 0, with M + step to tell whether M was enough. Raises UserError on bad sizes."""
    if n_templates < 1:
        raise UserError(f"--templates must be >= 1, got {n_templates}")
    part = balanced_partition(n_positions, partition)
    T = templates_for(n_templates + max(step, 0), net.d_model, seed)
    A = grid_matrix(net, T[:n_templates], part)
    r = exact_rank(A)
    r_more = exact_rank(grid_matrix(net, T, part)) if step > 0 else None
    rf = float_rank(A)
    return RankResult(n_layer=n_layer if n_layer is not None else len(net.layers), d_model=net.d_model,
                      n_head=net.n_head, n_positions=n_positions, n_templates=n_templates, residual=net.residual,
                      seed=seed, partition=[list(part[0]), list(part[1])], shape=list(A.shape), rank=r, rank_float=rf,
                      rank_more_templates=r_more, saturated=None if r_more is None else r_more == r,
                      cap=distinct_cap(n_templates, part), float_agrees=rf == r)


def weight_degree(n_layer: int) -> int:
    """Total degree of f in the weights: D_L = 2(3^L - 1) (D_l = 4 + 3 D_{l-1}, D_0 = 0)."""
    return 2 * (3**n_layer - 1)


def miss_bound(n_layer: int, size: int, *, draws: int = DRAWS, weight_range: int = WEIGHT_RANGE) -> float:
    """Schwartz-Zippel bound on P(best of ``draws`` weight draws on one grid < its generic rank):
    (size·D_L / (2R + 1))^draws, capped at 1; ``size`` bounds the generic rank (min(shape))."""
    return min(1.0, size * weight_degree(n_layer) / (2 * weight_range + 1)) ** max(1, draws)


def generic_rank(n_layer: int, d_model: int, n_head: int, *, draws: int = DRAWS, seed: int = 0, residual: bool = False,
                 weight_range: int | None = None, **kw) -> RankResult:
    """The largest grid rank over ``draws`` independent weight draws (seeds seed, seed+1, ...)
    on one set of templates (seed ``seed``): the generic rank except with probability <=
    :func:`miss_bound` (module docstring). The result's ``seed`` is the weight draw that gave it
    (its templates are always seed ``seed``'s). ``kw`` goes to :func:`grid_rank`."""
    best = None
    for s in range(seed, seed + max(1, draws)):
        net = random_network(n_layer, d_model, n_head, seed=s, residual=residual, weight_range=weight_range)
        r = grid_rank(net, seed=seed, **kw)
        r.seed = s
        if best is None or (r.rank, r.saturated or False) > (best.rank, best.saturated or False):
            best = r
    return best


def measure(n_layer: int, d_model: int, n_head: int, *, n_positions: int = 4, n_templates: int = 8, seed: int = 0,
            residual: bool = False, partition: int = 0, step: int = 2, draws: int = DRAWS,
            weight_range: int | None = None) -> dict:
    """Random-weight measurement next to the bounds: the generic rank (:func:`generic_rank`,
    the best of ``draws`` weight draws; ``seed`` in the result is the draw that gave it) with
    the RankResult's fields, plus ``draws``, ``weight_range``, ``miss_bound`` (:func:`miss_bound`
    for this grid), ``log3_rank``,
    ``counting_bound`` (log₃ C(3^L + d_x, d_x)) and the reconstructed published-form bounds
    (``log3_sep_lower``/``log3_sep_upper``, null when d_x <= H) from :mod:`separation`, and
    ``within_counting_bound``. Raises UserError on bad sizes."""
    from depthwidth.theory import separation

    R = WEIGHT_RANGE if weight_range is None else int(weight_range)
    res = generic_rank(n_layer, d_model, n_head, draws=draws, seed=seed, residual=residual, n_positions=n_positions,
                       n_templates=n_templates, partition=partition, step=step, weight_range=R).to_dict()
    res["draws"] = draws
    res["weight_range"] = R
    res["miss_bound"] = miss_bound(n_layer, min(res["shape"]), draws=draws, weight_range=R)
    count = separation.log_monomial_count(n_layer, d_model)
    res["log3_rank"] = math.log(res["rank"], 3) if res["rank"] > 0 else None
    res["counting_bound"] = count
    res["within_counting_bound"] = res["rank"] == 0 or res["log3_rank"] <= count + 1e-12
    try:
        b = separation.bounds(n_layer, d_model, n_head)
        res.update(log3_sep_lower=b["log3_sep_lower"], log3_sep_upper=b["log3_sep_upper"], regime=b["regime"])
    except UserError:  # d_x <= H: the published forms use log3(d_x - H)
        res.update(log3_sep_lower=None, log3_sep_upper=None, regime=separation.classify(n_layer, d_model)["regime"])
    res["threshold_depth"] = separation.threshold_depth(d_model)
    return res


def measure_adaptive(n_layer: int, d_model: int, n_head: int, *, residual: bool = False, seed: int = 0,
                     n_positions: int = 2, start: int = 8, max_templates: int = 128, step: int = 4,
                     draws: int = DRAWS, weight_range: int | None = None) -> dict:
    """:func:`measure` with M doubled from ``start`` until the rank is saturated (unchanged by
    ``step`` more templates, and at most half the distinct-row/column cap) or M would exceed
    ``max_templates``; the last measurement is returned (``saturated`` and ``cap`` say which)."""
    M = start
    while True:
        res = measure(n_layer, d_model, n_head, n_positions=n_positions, n_templates=M, seed=seed,
                      residual=residual, step=step, draws=draws, weight_range=weight_range)
        # Saturated with headroom: unchanged by `step` more templates and at most half the cap
        # (a rank just under the cap can still be the templates' limit, not the function's).
        if (res["saturated"] and 2 * res["rank"] <= res["cap"]) or 2 * M > max_templates:
            return res
        M *= 2


def adaptive_rank(net: Network, *, n_positions: int = 2, seed: int = 0, start: int = 8, max_templates: int = 128,
                  step: int = 4) -> RankResult:
    """:func:`grid_rank` of one given network (e.g. trained, rounded weights) with M doubled from
    ``start`` by the rule of :func:`measure_adaptive` (saturated with headroom, or M would exceed
    ``max_templates``); the last measurement. Raises UserError on bad sizes."""
    M = start
    while True:
        r = grid_rank(net, n_positions=n_positions, n_templates=M, seed=seed, step=step)
        if (r.saturated and 2 * r.rank <= r.cap) or 2 * M > max_templates:
            return r
        M *= 2


def is_lower_bound(row: dict) -> bool:
    """Whether a measured row's rank may still be the templates' limit rather than the function's
    (not saturated, or more than half the cap): then it is only a lower bound."""
    return not (row.get("saturated") and 2 * row["rank"] <= row["cap"])


TABLE_SHAPES = tuple((L, d, H) for L in (1, 2, 3) for d in (2, 3, 4, 6, 8) for H in (1, 2) if d % H == 0) \
    + ((4, 2, 1), (4, 2, 2))


def table(shapes=TABLE_SHAPES, *, residual=(False, True), seed: int = 0, max_templates: int = 128,
          progress=None) -> list[dict]:
    """:func:`measure_adaptive` for every (L, d_x, H) in ``shapes`` and residual setting; rows in
    that order. ``progress(i, n, row)`` is called after each row (for long tables)."""
    rows = []
    todo = [(s, r) for s in shapes for r in residual]
    for i, ((L, d, H), res) in enumerate(todo):
        rows.append(measure_adaptive(L, d, H, residual=res, seed=seed, max_templates=max_templates))
        if progress:
            progress(i + 1, len(todo), rows[-1])
    return rows


def write_table(out: str, *, seed: int = 0, max_templates: int = 128, progress=None) -> dict:
    """Measure :data:`TABLE_SHAPES` (both residual settings) and write ``out/table.json``:
    {"rows": [...], "method": ..., "seed", "max_templates", "n_positions"}; returns that dict."""
    import json
    import os
    import tempfile

    if os.path.exists(out) and not os.path.isdir(out):  # before minutes of measuring, not after
        raise UserError(f"--out {out} exists and is not a directory")
    rows = table(seed=seed, max_templates=max_templates, progress=progress)
    doc = {"what": "exact grid-tensor rank of the analysed self-attention network (theory.seprank)",
           "method": f"integer weights uniform in [-{WEIGHT_RANGE},{WEIGHT_RANGE}], integer templates in "
                     f"[-{TEMPLATE_RANGE},{TEMPLATE_RANGE}], rank over Q by FLINT fmpz_mat (exact); the best of {DRAWS} "
                     "weight draws on the same templates (below the generic rank with probability <= miss_bound, "
                     "Schwartz-Zippel: (min(shape)*2(3^L-1)/(2R+1))^draws); templates doubled from 8 until the rank "
                     "is unchanged by 4 more and at most half the cap, or 128; float64 SVD rank as a cross-check",
           "weight_range": WEIGHT_RANGE, "draws": DRAWS,
           "n_positions": 2, "seed": seed, "max_templates": max_templates, "rows": rows}
    os.makedirs(out, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out, prefix=".table.json.")
    with os.fdopen(fd, "w") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(out, "table.json"))
    return doc
