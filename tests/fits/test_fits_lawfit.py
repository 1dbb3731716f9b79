"""Weighted least squares for ln d_x = a + b L against the normal equations, 2 and <2 points."""

import math

import numpy as np
import pytest

from depthwidth.errors import UserError
from depthwidth.fits.lawfit import InsufficientPoints, fit_law


def test_wls_matches_normal_equations():
    L = np.array([8.49, 16.97, 33.94, 14.7, 20.78])
    y = np.array([5.52, 5.97, 6.95, 5.83, 6.21])
    sigma = np.array([0.05, 0.04, 0.12, 0.06, 0.08])
    f = fit_law(L, y, sigma)
    # Normal equations with W = diag(1/sigma^2): (X^T W X) p = X^T W y, cov = (X^T W X)^-1
    # (absolute sigma: no rescaling by the residuals).
    X = np.stack([np.ones_like(L), L], axis=1)
    W = np.diag(1 / sigma**2)
    M = X.T @ W @ X
    p = np.linalg.solve(M, X.T @ W @ y)
    cov = np.linalg.inv(M)
    assert (f.a, f.b) == pytest.approx(tuple(p), rel=1e-8)
    assert f.cov == pytest.approx(cov, rel=1e-6)
    r = y - X @ p
    chi2 = float(np.sum((r / sigma) ** 2))
    assert f.stats["dof"] == 3 and f.stats["n_points"] == 5
    assert f.stats["chi2"] == pytest.approx(chi2, rel=1e-8)
    assert f.stats["chi2_red"] == pytest.approx(chi2 / 3, rel=1e-8)
    w = 1 / sigma**2
    yw = np.sum(w * y) / np.sum(w)
    assert f.stats["r2"] == pytest.approx(1 - np.sum(w * r**2) / np.sum(w * (y - yw) ** 2), rel=1e-8)
    assert f.stats["r2_unweighted"] == pytest.approx(1 - np.sum(r**2) / np.sum((y - y.mean()) ** 2), rel=1e-8)
    se_a = math.sqrt(cov[0, 0])
    assert f.stats["ci95"]["a"] == pytest.approx([p[0] - 1.959964 * se_a, p[0] + 1.959964 * se_a], rel=1e-6)
    assert np.array(f.stats["cov_scaled"]) == pytest.approx(cov * max(1, chi2 / 3), rel=1e-6)
    assert f.stats["depth_range"] == [8.49, 33.94]


def test_two_points_give_the_exact_line_with_propagated_errors():
    # Through (6, 5.4) and (12, 5.7): b = 0.3/6 = 0.05, a = 5.4 - 0.3 = 5.1.
    # b = (y2 - y1)/dL -> var b = (s1^2 + s2^2)/dL^2; a = (L2 y1 - L1 y2)/dL ->
    # var a = (L2^2 s1^2 + L1^2 s2^2)/dL^2; cov(a, b) = -(L2 s1^2 + L1 s2^2)/dL^2.
    s1, s2 = 0.05, 0.1
    f = fit_law([6, 12], [5.4, 5.7], [s1, s2])
    assert (f.a, f.b) == pytest.approx((5.1, 0.05), rel=1e-9)
    assert f.cov[1, 1] == pytest.approx((s1**2 + s2**2) / 36, rel=1e-6)
    assert f.cov[0, 0] == pytest.approx((144 * s1**2 + 36 * s2**2) / 36, rel=1e-6)
    assert f.cov[0, 1] == pytest.approx(-(12 * s1**2 + 6 * s2**2) / 36, rel=1e-6)
    assert f.stats["dof"] == 0
    assert f.stats["chi2"] is None and f.stats["chi2_red"] is None and f.stats["r2"] is None


def test_fewer_than_two_points_and_unweightable_points():
    with pytest.raises(InsufficientPoints, match="found 1"):
        fit_law([6], [5.4], [0.1])
    with pytest.raises(UserError, match="zero or undefined bootstrap error"):
        fit_law([6, 12, 24], [5.4, 5.7, 6.4], [0.1, 0.0, 0.1])
    with pytest.raises(UserError, match="zero or undefined"):
        fit_law([6, 12, 24], [5.4, 5.7, 6.4], [0.1, math.nan, 0.1])
    with pytest.raises(UserError, match="same depth"):
        fit_law([6, 6], [5.4, 5.7], [0.1, 0.1])
