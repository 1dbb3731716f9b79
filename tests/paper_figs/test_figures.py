"""The four figures drawn from stored records and a fit file: files, validity, speed, content."""

import math
import re
import struct
import time

import numpy as np
import pytest

from depthwidth.fits.law import Law
from depthwidth.paper_figs import make_all
from depthwidth.paper_figs.inputs import FigureInputs
from depthwidth.paper_figs.registry import LAW, names

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def drawn(sweep, tmp_path_factory):
    results, fit_path, fit = sweep
    out = tmp_path_factory.mktemp("figs")
    t0 = time.perf_counter()
    paths = make_all(results, fit_path, out_dir=out)
    return paths, time.perf_counter() - t0, fit


def test_every_figure_is_written_as_png_and_pdf(drawn):
    paths, _, _ = drawn
    assert [p.name for p in paths] == [f"{n}.{ext}" for n in names(LAW) for ext in ("png", "pdf")]


def test_png_files_are_valid_images(drawn):
    from PIL import Image

    for p in drawn[0]:
        if p.suffix != ".png":
            continue
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC
        width, height = struct.unpack(">II", data[16:24])  # IHDR follows the 8-byte signature
        # 6.8 in at 150 dpi is 1020 px before the tight crop; every figure keeps most of it.
        assert 800 < width < 2500 and 500 < height < 2000, (p.name, width, height)
        with Image.open(p) as im:
            im.verify()


def test_pdf_files_are_single_page_pdfs(drawn):
    for p in drawn[0]:
        if p.suffix != ".pdf":
            continue
        data = p.read_bytes()
        assert data.startswith(b"%PDF-")
        assert data.rstrip().endswith(b"%%EOF")
        assert len(re.findall(rb"/Type\s*/Page\b", data)) == 1, p.name


def test_figures_are_produced_in_seconds(drawn):
    # About 4 s on an idle 2-core machine (imports included); the bound is loose because the
    # CI machine's CPUs are shared with other jobs. What it guards against is retraining or a
    # refit: a fit file is given, so nothing but drawing may happen.
    assert drawn[1] < 45.0


def test_no_timestamps_so_regeneration_is_byte_identical(drawn, sweep, tmp_path):
    results, fit_path, _ = sweep
    again = make_all(results, fit_path, out_dir=tmp_path)
    for a, b in zip(drawn[0], again):
        assert a.read_bytes() == b.read_bytes(), a.name


# ---------------------------------------------------------------- what the figures show


def _inputs(law=None, points=(), table=None):
    fit = {"points": list(points), "no_crossing": []}
    return FigureInputs(table=table, fit=fit, fit_source="test", law=law)


def test_width_band_is_the_fit_covariance(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from depthwidth.paper_figs.figures import width_vs_depth
    from depthwidth.paper_figs.style import figure_style

    # var(a + b·L) = var_a + 2·L·cov_ab + L²·var_b. With var_a = 0.04, cov_ab = -0.005,
    # var_b = 0.001: at L = 0 the variance is 0.04 (se 0.2); at L = 50 it is
    # 0.04 - 0.5 + 2.5 = 2.04 (se 1.4283). The band is ±1.959964·se around a + b·L.
    law = Law(4.0, 0.1, ((0.04, -0.005), (-0.005, 0.001)), (4.0, 16.0), "t", "t")
    with figure_style():
        fig, _ = width_vs_depth(_inputs(law))
        ax = fig.axes[0]
        band = next(c for c in ax.collections if c.get_label().startswith("95% band"))
        v = np.concatenate([p.vertices for p in band.get_paths()])
        for L, mean, se in ((0.0, 4.0, 0.2), (50.0, 9.0, math.sqrt(2.04))):
            ys = v[np.isclose(v[:, 0], L), 1]
            assert ys.min() == pytest.approx(mean - 1.959964 * se, abs=1e-5)
            assert ys.max() == pytest.approx(mean + 1.959964 * se, abs=1e-5)
        # The theory threshold ln d_x = L·ln 3 (L = log₃ d_x): slope ln 3 = 1.098612.
        theory = next(line for line in ax.lines if line.get_label().startswith("theory"))
        x, y = theory.get_data()
        assert (y[-1] - y[0]) / (x[-1] - x[0]) == pytest.approx(1.098612, abs=1e-6)


def test_width_figure_draws_the_fitted_form(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from depthwidth.fits.forms import FORMS
    from depthwidth.paper_figs.figures import width_vs_depth
    from depthwidth.paper_figs.style import figure_style

    # A log-depth fit ln d_x = 3 + 0.5·ln L: its curve is a + b·ln L (not a line in L), undefined
    # at L = 0 and so drawn from the next grid point; var = var_a + 2·ln L·cov_ab + ln²L·var_b:
    # at L = 50 (ln 50 = 3.912023), 0.04 - 0.039120 + 0.015304 = 0.016184.
    law = Law(3.0, 0.5, ((0.04, -0.005), (-0.005, 0.001)), (2.0, 16.0), "t", "t", form=FORMS["log-depth"])
    with figure_style():
        fig, caption = width_vs_depth(_inputs(law))
        ax = fig.axes[0]
        fitted = [line for line in ax.lines if line.get_label().startswith("this fit")]
        assert fitted[0].get_label() == "this fit: ln d_x = 3.000 + 0.5000·ln L"
        # The solid (fitted depths) and dashed (extrapolated) parts: NaN-masked copies, one colour.
        parts = [line for line in ax.lines if line.get_color() == fitted[0].get_color()]
        x = np.concatenate([line.get_xdata() for line in parts])
        y = np.concatenate([line.get_ydata() for line in parts])
        x, y = x[np.isfinite(y)], y[np.isfinite(y)]
        assert x.min() > 0 and x.max() == 50.0 and y == pytest.approx(3.0 + 0.5 * np.log(x), rel=1e-12)
        band = next(c for c in ax.collections if c.get_label().startswith("95% band"))
        v = np.concatenate([p.vertices for p in band.get_paths()])
        ys = v[np.isclose(v[:, 0], 50.0), 1]
        se = math.sqrt(0.04 - 0.01 * math.log(50) + 0.001 * math.log(50) ** 2)
        mean = 3.0 + 0.5 * math.log(50)
        assert ys.min() == pytest.approx(mean - 1.959964 * se, abs=1e-5)
        assert ys.max() == pytest.approx(mean + 1.959964 * se, abs=1e-5)
    assert "This fit: a = 3.000, b = 0.5000 of ln d_x = a + b·ln L" in caption


def test_loss_figure_marks_each_transition_at_its_fitted_size(drawn, sweep):
    import matplotlib

    matplotlib.use("Agg")
    from depthwidth.fits.table import load_table
    from depthwidth.paper_figs.figures import loss_vs_params
    from depthwidth.paper_figs.style import figure_style

    results, _, fit = sweep
    stars = sorted(p["N_star"] for p in fit["points"])
    assert len(stars) == 2  # pairs (4, 8) and (8, 16) both cross in the synthetic sweep
    inputs = FigureInputs(table=load_table(results), fit=fit, fit_source="test")
    with figure_style():
        fig, caption = loss_vs_params(inputs)
        vlines = sorted(line.get_xdata()[0] for line in fig.axes[0].lines
                        if line.get_linestyle() == "--" and len(line.get_xdata()) == 2
                        and line.get_xdata()[0] == line.get_xdata()[1])
    assert vlines == pytest.approx(stars, rel=1e-12)
    assert "L4→L8 N* =" in caption and "L8→L16 N* =" in caption


def test_optimal_depth_figure_verdicts_match_hand_computed_optima():
    import matplotlib

    matplotlib.use("Agg")
    from depthwidth.paper_figs.figures import optimal_depth
    from depthwidth.paper_figs.style import figure_style

    # Published law N(L) = 12·L·exp(2·5.039 + 2·0.0555·L):
    # GPT-3 175B, N = 1.739e11: N(80) = 960·e^18.958 = 1.64e11 < N < N(82) = 984·e^19.180 =
    #   2.13e11, so L* is in (80, 82) and 96 > 1.1·82: too deep (the paper's own remark).
    # BloombergGPT, 70×7680, N = 4.954e10: N(70) = 840·e^17.848 = 4.73e10 < N < N(71) =
    #   852·e^17.959 = 5.36e10, so L* is in (70, 71): near optimal (its authors used the law).
    # GPT-2 S / GPT-3 125M, N = 8.49e7: N(22) = 264·e^12.520 = 7.23e7 < N < N(24) = 9.85e7,
    #   so L* is in (22, 24) and 12 < 22/1.1: too wide.
    with figure_style():
        _, caption = optimal_depth(_inputs())
    deep = caption.split("too deep: ")[1].split(";")[0]
    near = caption.split("near optimal: ")[1].split(";")[0]
    wide = caption.split("too wide: ")[1].split(". Models")[0]
    assert "GPT-3 175B" in deep
    assert "BloombergGPT 50B" in near
    assert "GPT-2 S / GPT-3 125M" in wide


def test_loss_figure_draws_not_fitted_crossings_and_open_intervals(sweep):
    # A fit file (issue 9) lists crossings the law leaves out under "not_fitted", and a bound of
    # a 95% interval beyond the measured range as null: both are still drawn, the open band to
    # the end of the range.
    import copy

    import matplotlib

    matplotlib.use("Agg")
    from depthwidth.fits.table import load_table
    from depthwidth.paper_figs.figures import loss_vs_params
    from depthwidth.paper_figs.style import figure_style

    results, _, fit = sweep
    fit = copy.deepcopy(fit)
    first, second = sorted(fit["points"], key=lambda p: p["L_s"])
    second.update(fitted=False, ci95_open="above", N_star_ci95=[second["N_star_ci95"][0], None])
    fit["points"], fit["not_fitted"] = [first], [second]
    inputs = FigureInputs(table=load_table(results), fit=fit, fit_source="test")
    assert [p["L_s"] for p in inputs.transitions()] == [4, 8]
    with figure_style():
        fig, caption = loss_vs_params(inputs)
        bands = list(fig.axes[0].patches)  # the axvspan bands
    assert "L4→L8 N* =" in caption and "L8→L16 N* =" in caption
    assert len(bands) == 2
    right = max(b.get_x() + b.get_width() for b in bands)
    assert right == pytest.approx(second["N_range"][1], rel=1e-9)


def test_a_fit_of_some_seeds_is_drawn_with_those_seeds_only(tmp_path):
    # Session 8: figs of `fit --seeds 0,1,2,3` drew seed 4's records too (a sweep still running),
    # so the curves and bands beside the fit's N* were not the fit's
    from pathlib import Path

    from depthwidth.cli import main
    from depthwidth.paper_figs.inputs import load_inputs

    results = Path(__file__).resolve().parents[2] / "results" / "law-long"
    fit = tmp_path / "f.json"
    assert main(["fit", "--results", str(results), "--seeds", "0,1", "--bootstrap", "20", "--out", str(fit)]) == 0
    inputs = load_inputs(results, fit)
    assert {s for ss in inputs.table.cells["seeds"] for s in ss} == {0, 1}
    assert {s for ss in load_inputs(results, None).table.cells["seeds"] for s in ss} == {0, 1, 2}
