"""FitOptions: the fit's defaults in one place, validated at construction (before any work)."""

import inspect

import pytest

from depthwidth.errors import UserError
from depthwidth.fits.lawfit import build_fit
from depthwidth.fits.options import FitOptions
from depthwidth.fits.transitions import compute_transitions


def test_defaults_are_the_published_procedure_and_the_functions_use_them():
    # Levine et al. 2020 fitted doubling pairs; the point's depth is the geometric mean sqrt(Ls*Ld).
    o = FitOptions()
    assert o.kwargs() == {"pairs": "doubling", "assign": "geom", "bootstrap": 1000, "resample": "paired", "seed": 0}
    for f in (build_fit, compute_transitions):
        defaults = {k: p.default for k, p in inspect.signature(f).parameters.items() if k in o.kwargs()}
        assert defaults == o.kwargs()


@pytest.mark.parametrize("kw,msg", [
    ({"pairs": "every"}, "--pairs must be one of doubling, adjacent"),
    ({"assign": "middle"}, "--assign must be one of geom, arith, shallow, deep"),
    ({"resample": "widths"}, "--resample must be one of"),
    ({"bootstrap": 1}, "--bootstrap must be >= 2"),
    ({"seed": -1}, "--seed must be a whole number >= 0"),
])
def test_bad_options_raise_at_construction(kw, msg):
    with pytest.raises(UserError, match=msg):
        FitOptions(**kw)


def test_frozen():
    with pytest.raises(AttributeError):
        FitOptions().pairs = "adjacent"
