"""Measured separation rank: the grid-tensor rank of tiny self-attention networks.

The *analysed network* of Levine et al. 2020 (arXiv 2006.12467, §3 and App. B) is a stack of L
multi-head self-attention layers with the softmax, LayerNorm and feed-forward activations
removed. Layer l maps the positions' vectors x_1..x_N (width d_x) to

    y_i = [x_i +] Σ_h W_O^{l,h} Σ_j <W_Q^{l,h} x_i, W_K^{l,h} x_j> W_V^{l,h} x_j

with H heads of size d_a = d_x / H (W_Q, W_K, W_V: d_a × d_x; W_O: d_x × d_a) and the bracketed
residual term optional. Each layer is a cubic polynomial of its input, so the output is a
polynomial of degree 3^L. The function measured here is f(x_1..x_N) = coordinate 0 of the last
layer's output at position 0.

Grid tensor (the paper's App. B): pick M template vectors t_1..t_M; A[i_1..i_N] = f(t_{i_1}, ...,
t_{i_N}). Matricised across a balanced partition (P, Q) of the positions (rows: the P indices,
columns: the Q indices), its rank is a lower bound on the separation rank of f w.r.t. (P, Q).

Arithmetic. Weights and templates are integers, so every entry is an integer; float SVD ranks
of these matrices fail from L = 3 (entries span hundreds of orders of magnitude), and exact
elimination over Q (FLINT ``fmpz_mat.rank``, :func:`exact_rank`) took minutes for one 128 x 128
grid at L = 3.
The grid is therefore evaluated exactly *modulo* each of two primes p < 2^25 (:data:`PRIMES`;
:func:`evaluate_mod`, int64) and its rank computed over the field F_p (FLINT ``nmod_mat``,
:func:`mod_rank`). A minor nonzero mod p is a nonzero integer, so each rank over F_p is a
certified lower bound on the rank over Q; it falls short only if p divides every r × r minor,
and the two primes, whose larger rank is reported, agree in every row of the committed tables
(``ranks_mod``). A float64 SVD rank of the big-integer grid is kept as a cross-check where that
grid is small enough (:data:`FLOAT_CHECK_WORK`).

Generic rank, and the bound relied on. What is wanted is the *generic* rank r* of the grid
matrix: its rank for all weights and templates outside a proper algebraic subset; the rank at
any one draw is <= r*, so a measurement can only fall short. Each entry is a polynomial of total
degree <= D_L = 2(3^L - 1) in the weights (layer l's output has weight degree D_l = 4 + 3 D_{l-1},
D_0 = 0; the residual term only adds lower degrees) and <= 3^L in the template entries, so some
r* x r* minor is a nonzero polynomial of degree <= r*·D_L in the weights and <= r*·3^L in the
templates. By the Schwartz-Zippel lemma (over F_p too: the 2R + 1 integers of [-R, R] stay
distinct mod p while 2R + 1 <= p, :data:`MAX_WEIGHT_RANGE`), templates with entries uniform in
[-T, T] and k independent weight draws uniform in [-R, R] (the best of k *on the same
templates*, :func:`generic_rank`) miss r* with probability at most

    min(shape)·3^L / (2T + 1) + (min(shape)·D_L / (2R + 1))^k

(:func:`template_miss_bound` + :func:`miss_bound`, ``miss_bound`` in :func:`measure`'s result).
With R = T = 2^23 and k = 2 that is <= 2.1e-4 at L = 3, M = 128 and <= 5e-3 at L = 4, M = 1024.
Small weight ranges are not enough: with weights in [-2, 2] and head size 1 (d_x = 2, H = 2)
both draws landed on the exceptional set (rank 2 instead of 3 at L = 1, 12 instead of 15 at
L = 2; ``tests/theory/test_seprank.py``).

Templates, and when M is large enough. Templates are *distinct by construction*
(:func:`templates_for`): with entries in [-3, 3] there were only 49 distinct vectors at d_x = 2,
M = 64 draws held ~34, and a rank capped by the repeats passed for saturated (issue 23: the
"width-2 plateau" of rank 22 at L = 3 and 4, really 105 and 861). The rank can exceed neither
the number of distinct rows nor of distinct columns (f is symmetric in the positions other than
0, so a side of k positions not holding position 0 has only C(M+k-1, k) distinct index
multisets: :func:`distinct_cap`, counted on the distinct templates). A rank is reported as
exact (``lower_bound`` false) only when it is below that cap *and* unchanged by ``step`` new
templates; otherwise it is a lower bound. At N = 2 the cap test alone suffices for generic
templates: the grid is V_x C V_y^T (V: monomials evaluated at the templates), whose generic rank
is min(M, rank C), so a rank below M is rank C, the separation rank of f (App. B).
"""

from __future__ import annotations

import itertools
import math
import os
from dataclasses import asdict, dataclass

import numpy as np

from depthwidth import storage
from depthwidth.errors import UserError
from depthwidth.units import abbreviate

WEIGHT_RANGE = 2**23  # weights are integers in [-R, R], R = 2^23 (module docstring: the bound)
DRAWS = 2  # weight draws per measurement; the rank is their maximum
# Template entries are integers in [-2^23, 2^23]: [-3, 3] held only 49 distinct vectors at d_x = 2,
# and a wide range keeps the templates' Schwartz-Zippel term small (template_miss_bound).
TEMPLATE_RANGE = 2**23
# The two largest primes below 2^25 (sympy.prevprime): int64 products of residues stay < 2^50.
PRIMES = (33554393, 33554383)
# Weights must stay distinct modulo each prime for the Schwartz-Zippel bound over F_p: 2R + 1 <= p.
MAX_WEIGHT_RANGE = (min(PRIMES) - 1) // 2
MAX_GRID = 2_000_000  # evaluations (M^N) refused above this (memory: N·d_x int64 per evaluation)
# The big-integer grid (exact entries, for the float64 cross-check and exact_rank) costs about
# M^N * 3^L: measured ~18 s at L=3, M=204, N=2 (1.1M); refused above 2e7 ...
MAX_WORK = 20_000_000
# ... and the float64 cross-check is skipped above 2e6 (seconds, not minutes, per measurement).
FLOAT_CHECK_WORK = 2_000_000
MAX_TEMPLATES = 1024  # default largest M of the adaptive measurement
SECONDS_PER_OP = 4.0e-9  # cost model of estimate_seconds, calibrated on this code (README)
MAX_SECONDS = 600  # a measurement estimated longer is refused unless allowed (--allow-long)
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


def check_weight_range(weight_range: int | None) -> int:
    """R (default :data:`WEIGHT_RANGE`); UserError unless 1 <= R <= :data:`MAX_WEIGHT_RANGE`."""
    R = WEIGHT_RANGE if weight_range is None else int(weight_range)
    if not 1 <= R <= MAX_WEIGHT_RANGE:
        raise UserError(f"--weight-range must be in 1..{MAX_WEIGHT_RANGE} (2R + 1 distinct residues modulo the "
                        f"primes {min(PRIMES)}, {max(PRIMES)}), got {R}")
    return R


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
        raise UserError(f"{abbreviate(n_layer)} layer(s) of width {abbreviate(d_model)} have "
                        f"{abbreviate(4 * n_layer * d_model**2)} weights "
                        f"(> {MAX_WEIGHTS:,}); use a smaller width or fewer layers")
    R = check_weight_range(weight_range)
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
    return matricise(evaluate(net, templates[idx]).reshape((M,) * N), partition)


def exact_rank(A: np.ndarray) -> int:
    """Rank over the rationals of an integer matrix (FLINT fmpz_mat, exact)."""
    # sympy: ~0.5 s at import; only the symbolic checks pay it
    import flint

    if A.size == 0:
        return 0
    return int(flint.fmpz_mat([[int(v) for v in row] for row in A]).rank())


def to_float(A: np.ndarray) -> np.ndarray:
    """A in float64, an integer (object) matrix first divided by one power of two 2^s so that its
    largest entry fits (< 2^1000; exact ints reach thousands of bits at L = 3 with the default weights
    and templates), which
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


def templates_for(n_templates: int, d_model: int, seed: int, *, template_range: int | None = None) -> np.ndarray:
    """M *distinct* template vectors, (M, d_x) object array of Python ints, entries uniform in
    [-T, T] (T = ``template_range``, default :data:`TEMPLATE_RANGE`). A seeded stream of uniform
    draws with repeats skipped, read in fixed chunks, so the first M of M + k templates are the
    M templates: adding templates only adds genuinely new ones. Raises UserError when (2T + 1)^d_x
    vectors cannot hold M distinct ones."""
    T = TEMPLATE_RANGE if template_range is None else int(template_range)
    if n_templates > (2 * T + 1) ** d_model:
        raise UserError(f"{n_templates} distinct templates do not exist in [-{T}, {T}]^{d_model}")
    rng = np.random.default_rng(10_000 + seed)
    seen: set = set()
    rows: list = []
    while len(rows) < n_templates:
        for row in rng.integers(-T, T + 1, size=(64, d_model)).tolist():
            if tuple(row) not in seen and len(rows) < n_templates:
                seen.add(tuple(row))
                rows.append(row)
    return np.array(rows, dtype=np.int64).reshape(n_templates, d_model).astype(object)


def distinct_templates(templates: np.ndarray) -> int:
    """Number of distinct rows of ``templates`` (M, d_x): the templates that can raise a rank."""
    return len({tuple(int(v) for v in row) for row in np.asarray(templates)})


def distinct_cap(n_distinct: int, partition) -> int:
    """Most linearly independent rows or columns the matricised grid can have with ``n_distinct``
    distinct templates: a side holding position 0 has M^|side| index tuples; the other side,
    whose positions f treats alike, C(M+k-1, k) multisets."""
    P, Q = partition
    M = n_distinct
    return min(M ** len(P), math.comb(M + len(Q) - 1, len(Q)))


def _mod_weights(W, p: int) -> np.ndarray:
    if np.asarray(W).dtype.kind == "f":
        raise UserError("the modular rank needs integer weights (round them: Network.denominator)")
    return np.array([int(w) % p for w in np.asarray(W).flat], dtype=np.int64).reshape(np.shape(W))


def evaluate_mod(net: Network, X: np.ndarray, p: int) -> np.ndarray:
    """:func:`evaluate` reduced modulo the prime ``p`` (< 2^25), in int64: X (E, N, d_x) integer ->
    (E,) residues of c·f (c as in :func:`evaluate`, a power of the denominator, nonzero mod p).
    Exact: every product is < 2^50 and every sum has fewer than 2^13 terms (d_x <= 500 by
    :data:`MAX_WEIGHTS`), so nothing overflows int64 before its reduction."""
    g, s = net.denominator % p, 1
    X = (np.asarray(X, dtype=object) % p).astype(np.int64)
    for layer in net.layers:
        out = np.zeros_like(X)
        for Wq, Wk, Wv, Wo in ((_mod_weights(w, p) for w in head) for head in layer):
            q, k, v = X @ Wq.T % p, X @ Wk.T % p, X @ Wv.T % p
            scores = q @ np.swapaxes(k, 1, 2) % p
            out = (out + (scores @ v % p) @ Wo.T) % p
        if net.residual and net.denominator > 1:
            c = pow(g, 4, p) * s * s % p
            X, s = (c * X % p + out) % p, c * s % p
        else:
            X = (X + out) % p if net.residual else out
    return X[:, 0, 0]


def mod_rank(A: np.ndarray, p: int) -> int:
    """Rank over the field F_p of an integer matrix (FLINT nmod_mat). It never exceeds the rank
    over the rationals: a minor nonzero mod p is a nonzero integer."""
    # sympy: ~0.5 s at import; only the symbolic checks pay it
    import flint

    if A.size == 0:
        return 0
    return int(flint.nmod_mat(np.asarray(A, dtype=np.int64).tolist(), p).rank())


def matricise(vals: np.ndarray, partition) -> np.ndarray:
    """A grid tensor (M,)*N matricised across ``partition`` (P, Q): shape (M^|P|, M^|Q|), rows
    the P indices, columns the Q indices, both lexicographic."""
    P, Q = partition
    M = vals.shape[0]
    return vals.transpose(list(P) + list(Q)).reshape(M ** len(P), M ** len(Q))


def check_grid(n_templates: int, n_positions: int) -> None:
    """UserError when M^N evaluations exceed :data:`MAX_GRID`."""
    if n_templates**n_positions > MAX_GRID:
        raise UserError(f"{n_templates}^{n_positions} = {n_templates**n_positions:,} evaluations exceeds "
                        f"{MAX_GRID:,}; use fewer templates or positions")


@dataclass
class RankResult:
    """One measurement. seed: the templates' seed (from :func:`generic_rank`: the weight draw's
    seed; its templates are the base seed's); rank: the largest of ``ranks_mod``, the grid
    matrix's ranks over F_p for the primes ``moduli`` (each a lower bound on its rank over Q);
    rank_float: float64 SVD rank (None where the big-integer grid it needs is too large,
    :data:`FLOAT_CHECK_WORK`); distinct_templates: distinct template vectors among the M;
    rank_more_templates: rank with ``step`` more (new) templates (None if not computed);
    saturated: rank == rank_more_templates; cap: :func:`distinct_cap` of the distinct templates;
    lower_bound: not (saturated and rank < cap) -- the templates could not exceed the rank."""

    n_layer: int
    d_model: int
    n_head: int
    n_positions: int
    n_templates: int
    distinct_templates: int
    residual: bool
    seed: int
    partition: list
    shape: list
    rank: int
    ranks_mod: list
    moduli: list
    rank_float: int | None
    rank_more_templates: int | None
    saturated: bool | None
    cap: int
    lower_bound: bool
    float_agrees: bool | None

    def to_dict(self) -> dict:
        return asdict(self)


def grid_rank(net: Network, *, n_positions: int = 4, n_templates: int = 8, seed: int = 0, partition: int = 0,
              step: int = 2, n_layer: int | None = None, float_check: bool = True) -> RankResult:
    """Grid-tensor rank of ``net`` (module docstring) with M = ``n_templates`` distinct templates
    and, when ``step`` > 0, with ``step`` new ones added (the saturation check); over F_p for each
    prime in :data:`PRIMES`. ``float_check``: also the float64 SVD rank where affordable. Raises
    UserError on bad sizes."""
    if n_templates < 1:
        raise UserError(f"--templates must be >= 1, got {n_templates}")
    part = balanced_partition(n_positions, partition)
    M, M2 = n_templates, n_templates + max(step, 0)
    check_grid(M2, n_positions)
    T = templates_for(M2, net.d_model, seed)
    X = T[np.array(list(itertools.product(range(M2), repeat=n_positions)))]
    ranks, more = [], []
    for p in PRIMES:
        vals = evaluate_mod(net, X, p).reshape((M2,) * n_positions)
        ranks.append(mod_rank(matricise(vals[(slice(M),) * n_positions], part), p))
        if step > 0:
            more.append(mod_rank(matricise(vals, part), p))
    r, r_more = max(ranks), (max(more) if more else None)
    cap = distinct_cap(distinct_templates(T[:M]), part)
    saturated = None if r_more is None else r_more == r
    rf = float_rank_of(net, T[:M], part) if float_check else None
    return RankResult(n_layer=n_layer if n_layer is not None else len(net.layers), d_model=net.d_model,
                      n_head=net.n_head, n_positions=n_positions, n_templates=M, distinct_templates=distinct_templates(T[:M]),
                      residual=net.residual, seed=seed, partition=[list(part[0]), list(part[1])],
                      shape=[M ** len(part[0]), M ** len(part[1])], rank=r, ranks_mod=ranks, moduli=list(PRIMES),
                      rank_float=rf, rank_more_templates=r_more, saturated=saturated, cap=cap,
                      lower_bound=not (saturated and r < cap), float_agrees=None if rf is None else rf == r)


def float_rank_of(net: Network, templates: np.ndarray, partition) -> int | None:
    """float64 SVD rank of the exact (big-integer) grid matrix, the cross-check; None where
    M^N·3^L exceeds :data:`FLOAT_CHECK_WORK` (the big integers would take minutes)."""
    N = len(partition[0]) + len(partition[1])
    if len(templates) ** N * 3 ** len(net.layers) > FLOAT_CHECK_WORK:
        return None
    return float_rank(grid_matrix(net, templates, partition))


def weight_degree(n_layer: int) -> int:
    """Total degree of f in the weights: D_L = 2(3^L - 1) (D_l = 4 + 3 D_{l-1}, D_0 = 0)."""
    return 2 * (3**n_layer - 1)


def miss_bound(n_layer: int, size: int, *, draws: int = DRAWS, weight_range: int = WEIGHT_RANGE) -> float:
    """Schwartz-Zippel bound on P(best of ``draws`` weight draws on one grid < its generic rank):
    (size·D_L / (2R + 1))^draws, capped at 1; ``size`` bounds the generic rank (min(shape))."""
    return min(1.0, size * weight_degree(n_layer) / (2 * weight_range + 1)) ** max(1, draws)


def template_miss_bound(n_layer: int, size: int, n_templates: int, d_model: int,
                        template_range: int = TEMPLATE_RANGE) -> float:
    """Schwartz-Zippel bound on P(the templates drawn give a lower rank than generic templates):
    an r x r minor has degree <= r·3^L in the template entries (f has degree 3^L in its inputs),
    so uniform entries from 2T + 1 integers miss with probability <= size·3^L / (2T + 1);
    divided by P(M draws distinct) >= 1 - C(M, 2)/(2T + 1)^d_x, the condition
    :func:`templates_for` imposes. Capped at 1."""
    S = 2 * template_range + 1
    distinct = 1 - math.comb(n_templates, 2) / S**d_model
    return 1.0 if distinct <= 0 else min(1.0, size * 3**n_layer / S / distinct)


def generic_rank(n_layer: int, d_model: int, n_head: int, *, draws: int = DRAWS, seed: int = 0, residual: bool = False,
                 weight_range: int | None = None, **kw) -> RankResult:
    """The largest grid rank over ``draws`` independent weight draws (seeds seed, seed+1, ...)
    on one set of templates (seed ``seed``): the generic rank except with probability <=
    :func:`miss_bound` (module docstring). The result's ``seed`` is the weight draw that gave it
    (its templates are always seed ``seed``'s). ``kw`` goes to :func:`grid_rank`."""
    best = None
    for s in range(seed, seed + max(1, draws)):
        net = random_network(n_layer, d_model, n_head, seed=s, residual=residual, weight_range=weight_range)
        r = grid_rank(net, seed=seed, float_check=False, **kw)
        r.seed = s
        if best is None or (r.rank, r.saturated or False) > (best.rank, best.saturated or False):
            best = r
    return best


def _count_and_log3(count: int | None, log3: float | None, name: str) -> dict:
    """``name`` as a plain count (None where it exceeds 2^53, past exact float64 integers) and
    ``log3_<name>`` beside it: one unit per key."""
    plain = None if count is None or count > 2**53 else count
    return {name: plain, f"log3_{name}": log3}


def bound_fields(n_layer: int, d_model: int, n_head: int) -> dict:
    """The bounds next to a measured rank, each as a count and as log₃ (:func:`_count_and_log3`):
    ``counting_bound`` C(3^L + d_x, d_x) (:func:`depthwidth.theory.separation.monomial_count`) and
    the reconstructed published-form ``sep_lower``/``sep_upper`` (Levine et al. 2020, Theorems 1
    and 2 as reconstructed in :mod:`depthwidth.theory.separation`; None when d_x <= H), plus
    ``regime`` and ``threshold_depth``."""
    # mpmath: ~0.1 s at import; only the separation-rank bounds pay it
    from depthwidth.theory import separation

    log3_count = separation.log_monomial_count(n_layer, d_model)
    count = separation.monomial_count(n_layer, d_model) if log3_count * math.log10(3) < 30 else None
    out = _count_and_log3(count, log3_count, "counting_bound")
    try:
        b = separation.bounds(n_layer, d_model, n_head)
        lo, up, regime = b["log3_sep_lower"], b["log3_sep_upper"], b["regime"]
    except UserError:  # d_x <= H: the published forms use log3(d_x - H)
        lo = up = None
        regime = separation.classify(n_layer, d_model)["regime"]
    for name, v in (("sep_lower", lo), ("sep_upper", up)):
        out.update(_count_and_log3(None if v is None or v > 40 else 3.0**v, v, name))
    return {**out, "regime": regime, "threshold_depth": separation.threshold_depth(d_model)}


def measure(n_layer: int, d_model: int, n_head: int, *, n_positions: int = 4, n_templates: int = 8, seed: int = 0,
            residual: bool = False, partition: int = 0, step: int = 2, draws: int = DRAWS,
            weight_range: int | None = None, float_check: bool = True) -> dict:
    """Random-weight measurement next to the bounds: the generic rank (:func:`generic_rank`,
    the best of ``draws`` weight draws; ``seed`` in the result is the draw that gave it) with
    the RankResult's fields, plus ``draws``, ``weight_range``, ``template_range``,
    ``miss_bound`` (:func:`miss_bound` + :func:`template_miss_bound` for this grid),
    ``log3_rank``, the bounds of :func:`bound_fields` and ``within_counting_bound``.
    ``float_check``: the float64 SVD rank of the best draw. Raises UserError on bad sizes."""
    R = WEIGHT_RANGE if weight_range is None else int(weight_range)
    res = generic_rank(n_layer, d_model, n_head, draws=draws, seed=seed, residual=residual, n_positions=n_positions,
                       n_templates=n_templates, partition=partition, step=step, weight_range=R).to_dict()
    if float_check:
        add_float_rank(res, random_network(n_layer, d_model, n_head, seed=res["seed"], residual=residual,
                                           weight_range=R), seed=seed, partition=partition)
    size = min(res["shape"])
    res.update(draws=draws, weight_range=R, template_range=TEMPLATE_RANGE,
               miss_bound=min(1.0, miss_bound(n_layer, size, draws=draws, weight_range=R)
                              + template_miss_bound(n_layer, size, n_templates, d_model)),
               log3_rank=math.log(res["rank"], 3) if res["rank"] > 0 else None, **bound_fields(n_layer, d_model, n_head))
    cb, lcb = res["counting_bound"], res["log3_counting_bound"]
    res["within_counting_bound"] = res["rank"] <= cb if cb is not None else res["log3_rank"] is None or res["log3_rank"] <= lcb
    return res


def add_float_rank(res: dict, net: Network, *, seed: int = 0, partition: int = 0) -> dict:
    """Fill ``rank_float``/``float_agrees`` of a measured row (a RankResult dict) for ``net`` on
    the row's templates (:func:`float_rank_of`; None where too large); returns ``res``."""
    T = templates_for(res["n_templates"], res["d_model"], seed)
    rf = float_rank_of(net, T, balanced_partition(res["n_positions"], partition))
    res.update(rank_float=rf, float_agrees=None if rf is None else rf == res["rank"])
    return res


def _schedule(start: int, max_templates: int, n_positions: int = 2, step: int = 4) -> list[int]:
    """M = start, 2·start, ... up to ``max_templates``, and only while (M + step)^N evaluations
    fit :data:`MAX_GRID` (``start`` itself is checked by :func:`check_grid`)."""
    Ms = [start]
    while 2 * Ms[-1] <= max_templates and (2 * Ms[-1] + step) ** n_positions <= MAX_GRID:
        Ms.append(2 * Ms[-1])
    return Ms


def estimate_seconds(n_layer: int, d_model: int, *, n_positions: int = 2, start: int = 8, max_templates: int = 1024,
                     step: int = 4, draws: int = DRAWS) -> float:
    """Worst-case seconds of an adaptive measurement (every M of the doubling schedule, every
    draw and prime), from a cost model calibrated on this code (:data:`SECONDS_PER_OP`): the
    evaluations cost (M+step)^N·L·(4·N·d_x² + 2·N²·d_x) multiply-adds, the rank over F_p
    M^(3N/2)."""
    total = 0.0
    for M in _schedule(start, max_templates, n_positions, step):
        E = (M + step) ** n_positions
        ops = E * n_layer * (4 * n_positions * d_model**2 + 2 * n_positions**2 * d_model) + 2 * M ** (1.5 * n_positions)
        total += draws * len(PRIMES) * ops * SECONDS_PER_OP
    return total


def check_time(seconds: float, *, allow_long: bool, flag: str = "--allow-long") -> None:
    """UserError naming the limit and ``flag`` when an estimated ``seconds`` exceeds
    :data:`MAX_SECONDS` and the caller did not allow it."""
    if seconds > MAX_SECONDS and not allow_long:
        raise UserError(f"estimated {seconds / 60:.0f} min (worst case) exceeds the {MAX_SECONDS / 60:.0f}-min limit; "
                        f"pass {flag} to run it, or use fewer templates, layers or positions")


def measure_adaptive(n_layer: int, d_model: int, n_head: int, *, residual: bool = False, seed: int = 0,
                     n_positions: int = 2, start: int = 8, max_templates: int = MAX_TEMPLATES, step: int = 4,
                     draws: int = DRAWS, weight_range: int | None = None, progress=None) -> dict:
    """:func:`measure` with M doubled from ``start`` until the rank is no longer a lower bound
    (below the distinct-template cap and unchanged by ``step`` new templates) or M would exceed
    ``max_templates`` (or (M + step)^N would exceed :data:`MAX_GRID`); the last measurement, with
    its float64 cross-check. ``progress(M, row)``
    after each M (for long measurements)."""
    for M in _schedule(start, max_templates, n_positions, step):
        res = measure(n_layer, d_model, n_head, n_positions=n_positions, n_templates=M, seed=seed,
                      residual=residual, step=step, draws=draws, weight_range=weight_range, float_check=False)
        if progress:
            progress(M, res)
        if not res["lower_bound"]:
            break
    R = WEIGHT_RANGE if weight_range is None else int(weight_range)
    return add_float_rank(res, random_network(n_layer, d_model, n_head, seed=res["seed"], residual=residual,
                                              weight_range=R), seed=seed)


def adaptive_rank(net: Network, *, n_positions: int = 2, seed: int = 0, start: int = 8,
                  max_templates: int = MAX_TEMPLATES, step: int = 4) -> RankResult:
    """:func:`grid_rank` of one given network (e.g. trained, rounded weights) with M doubled from
    ``start`` by the rule of :func:`measure_adaptive`; the last measurement. Raises UserError on
    bad sizes."""
    for M in _schedule(start, max_templates, n_positions, step):
        r = grid_rank(net, n_positions=n_positions, n_templates=M, seed=seed, step=step, float_check=False)
        if not r.lower_bound:
            break
    T = templates_for(r.n_templates, net.d_model, seed)
    r.rank_float = float_rank_of(net, T, balanced_partition(n_positions))
    r.float_agrees = None if r.rank_float is None else r.rank_float == r.rank
    return r


def is_lower_bound(row: dict) -> bool:
    """Whether a measured row's rank may still be the templates' limit rather than the function's
    (:class:`RankResult` ``lower_bound``: not saturated, or not below the distinct-template cap)."""
    return bool(row["lower_bound"])


TABLE_SHAPES = tuple((L, d, H) for L in (1, 2, 3) for d in (2, 3, 4, 6, 8) for H in (1, 2) if d % H == 0) \
    + ((4, 2, 1), (4, 2, 2))


def table(shapes=TABLE_SHAPES, *, residual=(False, True), seed: int = 0, max_templates: int = MAX_TEMPLATES,
          progress=None, partial=None) -> list[dict]:
    """:func:`measure_adaptive` for every (L, d_x, H) in ``shapes`` and residual setting; rows in
    that order. ``progress(i, n, row)`` is called after each row (for long tables), and
    ``partial(rows)`` with the rows so far (to store them as they come)."""
    rows = []
    todo = [(s, r) for s in shapes for r in residual]
    for i, ((L, d, H), res) in enumerate(todo):
        rows.append(measure_adaptive(L, d, H, residual=res, seed=seed, max_templates=max_templates))
        if progress:
            progress(i + 1, len(todo), rows[-1])
        if partial:
            partial(rows)
    return rows


def table_seconds(shapes=TABLE_SHAPES, *, residual=(False, True), max_templates: int = MAX_TEMPLATES) -> float:
    """Worst-case seconds of :func:`table` (:func:`estimate_seconds` summed over its rows)."""
    return len(residual) * sum(estimate_seconds(L, d, max_templates=max_templates) for L, d, _ in shapes)


def write_table(out: str, *, seed: int = 0, max_templates: int = MAX_TEMPLATES, progress=None) -> dict:
    """Measure :data:`TABLE_SHAPES` (both residual settings) and write ``out/table.json``
    atomically after every row (``complete`` false until the last): {"rows": [...], "method",
    "seed", "max_templates", "n_positions", ...}; returns that dict. Raises UserError when
    ``out`` is a file."""
    if os.path.exists(out) and not os.path.isdir(out):  # before minutes of measuring, not after
        raise UserError(f"--out {out} exists and is not a directory")
    doc = {"what": "grid-tensor rank of the analysed self-attention network (theory.seprank)",
           "method": f"integer weights uniform in [-{WEIGHT_RANGE},{WEIGHT_RANGE}], distinct integer templates uniform "
                     f"in [-{TEMPLATE_RANGE},{TEMPLATE_RANGE}]^d_x; the grid evaluated exactly modulo the primes "
                     f"{list(PRIMES)} and its rank over each F_p by FLINT nmod_mat (a lower bound on its rank over Q; "
                     f"rank = the larger); the best of {DRAWS} weight draws on the same templates (below the generic "
                     "rank with probability <= miss_bound, Schwartz-Zippel over weights and templates); templates "
                     "doubled from 8 until the rank is below the number of distinct templates and unchanged by 4 "
                     f"new ones (else a lower bound), or {max_templates}; float64 SVD rank of the big-integer grid as "
                     f"a cross-check where M^2*3^L <= {FLOAT_CHECK_WORK:,}",
           "command": "depthwidth theory seprank --table --out results/seprank --allow-long",
           "weight_range": WEIGHT_RANGE, "template_range": TEMPLATE_RANGE, "moduli": list(PRIMES), "draws": DRAWS,
           "n_positions": 2, "seed": seed, "max_templates": max_templates, "complete": False, "rows": []}
    store = storage.open_results(out)

    def partial(rows):
        doc["rows"] = list(rows)
        doc["complete"] = len(rows) == 2 * len(TABLE_SHAPES)
        store.replace("table.json", doc)

    table(seed=seed, max_templates=max_templates, progress=progress, partial=partial)
    return doc
