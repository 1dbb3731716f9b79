"""Shared fixtures: a small synthetic sweep (fits.synthetic, known law) and its fit file."""

import json

import pytest


@pytest.fixture(scope="package")
def sweep(tmp_path_factory):
    """Synthetic records for depths 4, 8, 16 (3 seeds, 4 widths a decade) and a fit file made
    from them with 200 bootstrap replicates. Returns (results_dir, fit_path, fit dict)."""
    from depthwidth.fits.lawfit import build_fit
    from depthwidth.fits.synthetic import write_synthetic
    from depthwidth.fits.table import load_table

    root = tmp_path_factory.mktemp("sweep")
    results = root / "results"
    write_synthetic(results, depths=(4, 8, 16), n_seeds=3, per_decade=4)
    fit = build_fit(load_table(results), bootstrap=200)
    fit_path = root / "fit.json"
    fit_path.write_text(json.dumps(fit))
    return results, fit_path, fit
