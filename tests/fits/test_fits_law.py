"""The built-in law, the fit-file format and law loading (depthwidth.fits.law)."""

import json

import pytest

from depthwidth.errors import UserError
from depthwidth.fits.law import BUILTIN_LAWS, FIT_FORMAT, FIT_VERSION, law_from_fit_dict, levine2020, load_law


def _fit_dict(**law_over):
    law = {"a": 4.0, "b": 0.08, "cov": [[0.01, -0.001], [-0.001, 0.0002]],
           "cov_scaled": [[0.02, -0.002], [-0.002, 0.0004]],
           "bootstrap": {"replicates": 100, "cov": [[0.03, 0.0], [0.0, 0.0003]]},
           "depth_range": [3.0, 20.0]}
    law.update(law_over)
    return {"format": FIT_FORMAT, "version": FIT_VERSION, "status": "ok", "law": law}


def test_levine2020_constants_are_the_published_ones():
    # Levine et al. 2020 (arXiv 2006.12467 v3): ln d_x = 5.039 + 0.0555 L, natural log.
    law = levine2020()
    assert (law.a, law.b) == (5.039, 0.0555)
    assert law.cov is None and law.ci_note  # the paper gives no covariance: no invented CI
    assert law.depth_range == (6.0, 48.0)
    assert load_law("levine2020") == law
    assert set(BUILTIN_LAWS) == {"levine2020"}


def test_fit_file_round_trip_and_cov_kinds(tmp_path):
    p = tmp_path / "fit.json"
    p.write_text(json.dumps(_fit_dict()))
    law = load_law(str(p))
    assert (law.a, law.b) == (4.0, 0.08)
    assert law.cov == ((0.01, -0.001), (-0.001, 0.0002))
    assert law.depth_range == (3.0, 20.0)
    assert load_law(str(p), "scaled").cov == ((0.02, -0.002), (-0.002, 0.0004))
    assert load_law(str(p), "bootstrap").cov == ((0.03, 0.0), (0.0, 0.0003))


def test_missing_cov_gives_no_ci_note():
    law = law_from_fit_dict(_fit_dict(cov_scaled=None), "x.json", "scaled")
    assert law.cov is None and "no scaled covariance" in law.ci_note


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(format="other"), "not a depthwidth fit file"),
    (lambda d: d.update(version=99), "unsupported fit file version"),
    (lambda d: d.update(status="insufficient", law=None), "fit status is 'insufficient'"),
    (lambda d: d.pop("law"), "missing 'law'"),
    (lambda d: d["law"].update(a="5"), "law.a must be a finite number"),
    (lambda d: d["law"].update(b=None), "law.b must be a finite number"),
    (lambda d: d["law"].update(cov=[[1.0, 0.0]]), "2x2"),
    (lambda d: d["law"].update(cov=[[1.0, 0.5], [0.4, 1.0]]), "symmetric positive semi-definite"),
    (lambda d: d["law"].update(cov=[[1.0, 2.0], [2.0, 1.0]]), "symmetric positive semi-definite"),
    (lambda d: d["law"].update(cov=[[-1.0, 0.0], [0.0, 1.0]]), "symmetric positive semi-definite"),
    (lambda d: d["law"].update(depth_range=[1.0]), "depth_range"),
])
def test_malformed_fit_dicts_raise_user_error(mutate, message):
    d = _fit_dict()
    mutate(d)
    with pytest.raises(UserError, match=message):
        law_from_fit_dict(d, "f.json")


def test_unknown_name_bad_json_and_bad_cov_kind(tmp_path):
    with pytest.raises(UserError, match="unknown law 'kaplan2020'"):
        load_law("kaplan2020")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match="cannot read fit file"):
        load_law(str(bad))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_fit_dict()))
    with pytest.raises(UserError, match="--cov must be one of"):
        load_law(str(good), "robust")
    with pytest.raises(UserError, match="is a directory, not a fit file"):
        load_law(str(tmp_path))  # a directory is not a fit file (it was called an unknown law)
    with pytest.raises(UserError, match="--cov scaled needs a fit file as --fit: the built-in law levine2020 has no"):
        load_law("levine2020", "scaled")  # silently ignored before: the built-in law has no covariance
    assert load_law("levine2020", "auto").cov is None
