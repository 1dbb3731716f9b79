"""Measured separation rank of the analysed network (theory.seprank): exact grid-tensor ranks."""

import itertools
import math

import numpy as np
import pytest

from depthwidth.errors import UserError
from depthwidth.theory import seprank


def test_a_product_function_has_rank_one():
    # f(x0, x1) = (a.x0)(b.x1): every grid matrix is the outer product of two vectors.
    T = seprank.templates_for(12, 3, seed=0)
    a, b = np.array([1, -2, 3], dtype=object), np.array([2, 1, -1], dtype=object)
    A = np.array([[int(a @ s) * int(b @ t) for t in T] for s in T], dtype=object)
    assert seprank.exact_rank(A) == 1


def test_one_layer_one_head_by_hand():
    # L=1, H=1, d_x=1, weights q=k=v=o=1, no residual: f(x0, x1) = x0 * (x0*x0 + x1*x1)
    # = x0^3 + x0 * x1^2: two separable terms, so rank 2 for templates with >= 2 distinct x0 and
    # >= 2 distinct x1^2 values.
    one = np.ones((1, 1), dtype=object)
    net = seprank.network_from_arrays([[(one, one, one, one)]])
    T = np.array([[1], [2], [3], [-1]], dtype=object)
    A = seprank.grid_matrix(net, T, ((0,), (1,)))
    assert [[int(v) for v in row] for row in A[:2]] == [[1 + 1, 1 + 4, 1 + 9, 1 + 1], [8 + 2, 8 + 8, 8 + 18, 8 + 2]]
    assert seprank.exact_rank(A) == 2
    # With the residual: f = x0 + x0^3 + x0 x1^2, still span{1, x1^2} x functions of x0: rank 2.
    net_r = seprank.network_from_arrays([[(one, one, one, one)]], residual=True)
    assert seprank.exact_rank(seprank.grid_matrix(net_r, T, ((0,), (1,)))) == 2


def test_rank_is_the_same_for_every_balanced_partition():
    # Levine et al. 2020, Proposition 1: attention treats all positions alike, so with 4
    # positions the partitions {0,1}|{2,3}, {0,2}|{1,3}, {0,3}|{1,2} give one rank.
    net = seprank.random_network(2, 3, 1, seed=1)
    ranks = {seprank.grid_rank(net, n_positions=4, n_templates=5, partition=k, step=0).rank for k in range(3)}
    assert len(ranks) == 1


def test_exact_rank_equals_float_rank_where_well_conditioned():
    for L, d in ((1, 4), (2, 2)):
        r = seprank.grid_rank(seprank.random_network(L, d, 1, seed=2), n_positions=2, n_templates=24, step=0)
        assert r.rank == r.rank_float and r.float_agrees


def test_one_layer_rank_is_width_plus_one_and_within_the_counting_bound():
    # Measured (and saturated) for one layer: the rank is d_x + 1 for every width tried.
    for d in (2, 3, 4):
        m = seprank.measure_adaptive(1, d, 1, max_templates=32)
        assert m["saturated"] and m["rank"] == d + 1
        assert m["within_counting_bound"] and m["rank"] <= m["counting_bound"]
        assert m["counting_bound"] == math.comb(3 + d, d)
        assert m["log3_counting_bound"] == pytest.approx(math.log(math.comb(3 + d, d), 3))


def test_bad_sizes_are_one_line_errors():
    with pytest.raises(UserError, match="must divide"):
        seprank.random_network(1, 3, 2)
    with pytest.raises(UserError, match="even"):
        seprank.balanced_partition(3)
    with pytest.raises(UserError, match="would take hours"):  # deep: the entries' degree is 3^L
        seprank.grid_matrix(seprank.random_network(9, 8, 1), seprank.templates_for(400, 8, 0), ((0,), (1,)))
    with pytest.raises(UserError, match="exceeds"):
        seprank.grid_matrix(seprank.random_network(1, 2, 1), seprank.templates_for(40, 2, 0), ((0, 1), (2, 3)))


def test_cli_one_measurement_and_the_figure_from_a_stored_table(tmp_path, capsys):
    import json

    from depthwidth.cli import main

    assert main(["theory", "seprank", "--layers", "1", "--width", "3", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["rank"] == 4 and r["saturated"] and not r["lower_bound"]  # d_x + 1 for one layer
    assert main(["theory", "seprank", "--width", "3"]) == 2
    assert "needs --layers and --width" in capsys.readouterr().err
    # seprank-fig draws from a stored table only (two measured rows)
    rows = [dict(seprank.measure(L, 2, 1, n_positions=2, n_templates=16, step=4), residual=False) for L in (1, 2)]
    (tmp_path / "table.json").write_text(json.dumps({"rows": rows, "n_positions": 2}))
    assert main(["seprank-fig", "--table", str(tmp_path / "table.json"), "--out", str(tmp_path / "figures"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sorted(p.rsplit(".", 1)[1] for p in out["figures"]) == ["pdf", "png"]
    assert (tmp_path / "figures" / "fig5_measured_separation_rank.png").read_bytes()[:4] == b"\x89PNG"
    (tmp_path / "table.json").write_text("{}")
    assert main(["seprank-fig", "--table", str(tmp_path / "table.json"), "--out", str(tmp_path)]) == 2


def test_rational_weights_are_exact():
    # Weights K/g (g = 4), residual, 2 layers: evaluate() on the integers K with denominator g
    # gives c·f for one constant c > 0, where f is computed directly in Fractions.
    from fractions import Fraction

    net = seprank.random_network(2, 3, 1, seed=4, residual=True)
    g = 4
    scaled = seprank.network_from_arrays(net.layers, residual=True, denominator=g)
    frac = seprank.network_from_arrays(
        [[tuple(np.vectorize(lambda v: Fraction(int(v), g), otypes=[object])(w) for w in h) for h in layer]
         for layer in net.layers], residual=True)
    X = seprank.templates_for(6, 3, seed=1)[np.random.default_rng(0).integers(0, 6, size=(7, 2))]
    exact, got = seprank.evaluate(frac, X), seprank.evaluate(scaled, X)
    c = got[0] / exact[0]
    assert c > 0 and all(a == c * b for a, b in zip(got, exact))
    assert c == g**4 * (g**4) ** 3  # s after two layers: s1 = g^4, s2 = g^4 * s1^3
    with pytest.raises(UserError):
        seprank.network_from_arrays(net.layers, denominator=0)


def test_small_integer_weights_miss_the_generic_rank_the_default_range_reaches_it():
    # d_x = 2, H = 2 (head size 1): integer weights in [-2, 2] (the earlier default), best of 2
    # draws, land on the exceptional set -- rank 2 instead of 3 at L = 1, 12 instead of 15 at
    # L = 2 (and f = 0 instead of rank 22 at L = 3). The default range [-2^20, 2^20] reaches the
    # rank that Gaussian weights (N(0, 1) rounded to 1/64) and trained weights
    # (results/seprank/trained.json) give; Schwartz-Zippel bounds its miss probability.
    rng = np.random.default_rng(0)
    shapes = [(1, 2), (1, 2), (1, 2), (2, 1)]  # W_Q, W_K, W_V (d_a x d_x), W_O (d_x x d_a), d_a = 1
    for L, M, small, generic in ((1, 12, 2, 3), (2, 32, 12, 15)):
        kw = dict(n_positions=2, n_templates=M, step=0)
        assert seprank.generic_rank(L, 2, 2, weight_range=2, **kw).rank == small
        assert seprank.generic_rank(L, 2, 2, **kw).rank == generic
        gauss = seprank.network_from_arrays(
            [[tuple(np.rint(64 * rng.normal(size=s)).astype(np.int64) for s in shapes) for _ in range(2)]
             for _ in range(L)], denominator=64)
        assert seprank.grid_rank(gauss, **kw).rank == generic
    # (size * 2(3^L - 1) / (2R + 1))^draws: the bound the default relies on
    assert seprank.weight_degree(3) == 52
    assert seprank.miss_bound(2, 32) == pytest.approx((32 * 16 / (2 * seprank.WEIGHT_RANGE + 1)) ** 2)
    assert seprank.miss_bound(3, 128) < 1.1e-5 and seprank.miss_bound(3, 128, weight_range=2) == 1.0


def _coefficient_rank(net, p: int) -> int:
    """Independent of templates: f(x0, x1) expanded as a polynomial over F_p (FLINT nmod_mpoly),
    its coefficients arranged as a matrix (rows: monomials in x0, columns: in x1); that matrix's
    rank is the separation rank of f w.r.t. ({0}, {1}) over F_p (Levine et al. 2020, App. B)."""
    import flint

    d = net.d_model
    ctx = flint.nmod_mpoly_ctx.get(("x", 2 * d), modulus=p)
    zero = ctx.from_dict({})
    X = [list(ctx.gens()[:d]), list(ctx.gens()[d:])]

    def lin(W, x):
        return [sum((int(W[a, b]) * x[b] for b in range(W.shape[1])), zero) for a in range(W.shape[0])]

    for layer in net.layers:
        out = [[zero] * d, [zero] * d]
        for Wq, Wk, Wv, Wo in layer:
            q, k, v = ([lin(W, x) for x in X] for W in (Wq, Wk, Wv))
            for i in range(2):
                att = [sum((sum((qa * ka for qa, ka in zip(q[i], k[j])), zero) * v[j][c] for j in range(2)), zero)
                       for c in range(len(v[0]))]
                out[i] = [a + b for a, b in zip(out[i], lin(Wo, att))]
        X = [[a + b for a, b in zip(X[i], out[i])] for i in range(2)] if net.residual else out
    f = X[0][0]
    rows: dict = {}
    cols: dict = {}
    entries = [(rows.setdefault(tuple(e[:d]), len(rows)), cols.setdefault(tuple(e[d:]), len(cols)), int(c))
               for e, c in zip(f.monoms(), f.coeffs())]
    C = np.zeros((len(rows), len(cols)), dtype=np.int64)
    for r, c, v in entries:
        C[r, c] = v
    return seprank.mod_rank(C, p)


@pytest.mark.parametrize("residual", [False, True])
def test_width_two_three_layers_is_not_the_template_plateau(residual):
    # Issue 23: templates in [-3, 3] (49 distinct at d_x = 2) gave rank 22 at L = 3, reported as
    # saturated. Distinct wide-range templates give the rank of f's coefficient matrix, computed
    # here without any template; the old plateau was the templates' limit.
    m = seprank.measure_adaptive(3, 2, 1, residual=residual)
    net = seprank.random_network(3, 2, 1, seed=m["seed"], residual=residual)
    assert m["rank"] > 22 and not m["lower_bound"]
    assert m["rank"] == _coefficient_rank(net, seprank.PRIMES[0]) < m["distinct_templates"]
    assert m["ranks_mod"][0] == m["ranks_mod"][1] and m["distinct_templates"] == m["n_templates"]


def test_templates_that_cannot_exceed_the_rank_give_a_lower_bound():
    # 64 distinct templates cannot show a rank above 64: the measurement must say so, even
    # though 4 more templates would be needed to tell (and are not enough to exceed it either).
    m = seprank.measure(3, 2, 1, n_positions=2, n_templates=64, step=4)
    assert m["rank"] == m["cap"] == 64 and m["lower_bound"] and seprank.is_lower_bound(m)
    assert m["rank_more_templates"] == 68 and not m["saturated"]


def test_templates_are_distinct_new_ones_extend_them_and_the_cap_counts_distinct_ones():
    T = seprank.templates_for(49, 2, seed=0, template_range=3)  # every vector of [-3, 3]^2
    assert seprank.distinct_templates(T) == 49
    assert {tuple(int(v) for v in row) for row in T} == set(itertools.product(range(-3, 4), repeat=2))
    more = seprank.templates_for(40, 2, seed=1)
    assert (more[:30] == seprank.templates_for(30, 2, seed=1)).all() and seprank.distinct_templates(more) == 40
    with pytest.raises(UserError, match="do not exist"):
        seprank.templates_for(50, 2, seed=0, template_range=3)
    repeated = np.array([[1, 2], [1, 2], [3, 4]], dtype=object)
    assert seprank.distinct_templates(repeated) == 2
    assert seprank.distinct_cap(2, ((0,), (1,))) == 2 and seprank.distinct_cap(3, ((0, 1), (2, 3))) == 6


def test_modular_rank_agrees_with_the_exact_rank_over_q():
    # Where exact elimination over Q is affordable: the rank over F_p never exceeds it, and both
    # primes reach it.
    for L, d, H, M in ((1, 3, 1, 6), (2, 2, 2, 20), (2, 3, 1, 12)):
        net = seprank.random_network(L, d, H, seed=5, residual=L == 2)
        T = seprank.templates_for(M, d, seed=0)
        A = seprank.grid_matrix(net, T, ((0,), (1,)))
        q = seprank.exact_rank(A)
        idx = np.array(list(itertools.product(range(M), repeat=2)))
        for p in seprank.PRIMES:
            Ap = seprank.evaluate_mod(net, T[idx], p).reshape(M, M)
            assert (Ap == np.array([[int(v) % p for v in row] for row in A])).all()
            assert seprank.mod_rank(Ap, p) == q


def test_bounds_are_counts_beside_their_log3():
    b = seprank.bound_fields(2, 3, 1)
    assert b["counting_bound"] == math.comb(12, 3) == 220
    assert b["log3_counting_bound"] == pytest.approx(math.log(220, 3))
    assert b["sep_upper"] == pytest.approx(3 ** b["log3_sep_upper"]) and b["sep_lower"] == pytest.approx(3 ** b["log3_sep_lower"])
    big = seprank.bound_fields(12, 8, 1)  # C(3^12 + 8, 8) ~ 1e34: past exact float64 integers
    assert big["counting_bound"] is None and big["log3_counting_bound"] == pytest.approx(
        math.log(math.comb(3**12 + 8, 8), 3))
    assert seprank.bound_fields(1, 2, 2)["sep_upper"] is None  # d_x <= H: no published form


def test_weight_range_out_of_range_is_a_one_line_error():
    for R in (0, seprank.MAX_WEIGHT_RANGE + 1, 10**100, 2**63 - 2):
        with pytest.raises(UserError, match="--weight-range must be in 1.."):
            seprank.random_network(1, 2, 1, weight_range=R)
    assert seprank.random_network(1, 2, 1, weight_range=seprank.MAX_WEIGHT_RANGE).d_model == 2


def test_long_measurements_are_estimated_refused_or_reported(capsys, monkeypatch):
    from depthwidth.cli import main

    assert seprank.estimate_seconds(4, 2) > seprank.estimate_seconds(3, 2) > seprank.estimate_seconds(3, 2, max_templates=128)
    assert main(["theory", "seprank", "--layers", "400", "--width", "8"]) == 2
    err = capsys.readouterr().err
    assert "exceeds the 10-min limit" in err and "--allow-long" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setattr(seprank, "SECONDS_PER_OP", 1e-4)  # as if slow: the estimate and progress lines show
    assert main(["theory", "seprank", "--layers", "2", "--width", "2", "--max-templates", "32", "--json"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("[seprank] up to ~") and "[seprank] M=8: rank 8 (lower bound)" in err
    assert err[-1] == "[seprank] M=16: rank 15"
