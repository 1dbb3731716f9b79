"""The out-of-sample record of a form comparison: its pre-registered forms predictions and their
verdicts (issue "Which law?", items 5 and 6).

A forms prediction (``predict --forms COMPARISON``, :mod:`depthwidth.fits.predict_forms`) lives in
``results/predictions/``, beside the comparison's results folder, and names the comparison by its
sha256. Its verdict is written by ``predict --check PREDICTION --fit MEASURED --out FILE`` into
``results/predictions/verdicts/``: a *forms verdict file* (:data:`FORMS_VERDICT_FORMAT`) holding
the rows of :func:`depthwidth.fits.predict_forms.verdict_forms`, the sha256 of the prediction, of
the comparison it was made from and of the measured fit, and their paths as given (relative to
the repository root when run from there, as the committed ones are). It has no time stamp: the
same inputs write the same bytes, so a committed verdict can be regenerated and compared.

``query --fit X.json`` with a comparison beside it reads this record (:func:`forms_record`): per
prediction, "not yet measured" or the outcome with each form's status (consistent / fails / not
contradicted), z, the updated Akaike weights and the favoured form, as the prediction's own rule
gives them. Bad records are refused in one line (:class:`depthwidth.errors.UserError`): a verdict
whose prediction or measured fit changed after it was written no longer applies.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits.validation import (
    FORMS_PREDICTION_FORMAT,
    FORMS_VERDICT_FORMAT,
    VERDICTS,
    _rel,
    _sha256,
    check_input,
    predictions_dir,
)
from depthwidth.units import format_count

FORMS_VERDICT_VERSION = 1
OUTCOMES = ("resolved", "deeper_worse_throughout", "deeper_better_throughout", "not resolved", "not measured")


def forms_verdict_record(prediction: dict[str, Any], prediction_path: str, prediction_raw: bytes,
                         measured_path: str, measured_raw: bytes, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The forms verdict file (module docstring) of ``rows``, the verdict of the forms prediction
    at ``prediction_path`` against the measured fit at ``measured_path``."""
    return {"format": FORMS_VERDICT_FORMAT, "version": FORMS_VERDICT_VERSION,
            "prediction": {"path": str(prediction_path), "sha256": _sha256(prediction_raw),
                           "comparison_sha256": prediction["comparison"]["sha256"]},
            "measured_fit": {"path": str(measured_path), "sha256": _sha256(measured_raw)},
            "verdicts": rows}


def _row_ok(r: Any) -> bool:
    return (isinstance(r, dict) and isinstance(r.get("pair"), list) and len(r["pair"]) == 2
            and r.get("outcome") in OUTCOMES and isinstance(r.get("forms"), list)
            and all(isinstance(f, dict) and isinstance(f.get("form"), str) and isinstance(f.get("status"), str)
                    for f in r["forms"]))


def is_forms_verdict(d: Any) -> bool:
    """Whether a parsed JSON document claims to be a forms verdict file (by its format)."""
    return isinstance(d, dict) and d.get("format") == FORMS_VERDICT_FORMAT


def check_forms_verdict(d: Any, name: str) -> dict[str, Any]:
    """``d`` (parsed from the file ``name``) when it is a well-formed forms verdict file;
    UserError (one line) otherwise."""
    ok = (is_forms_verdict(d) and d.get("version") == FORMS_VERDICT_VERSION
          and all(isinstance(d.get(k), dict) and isinstance(d[k].get("path"), str)
                  and isinstance(d[k].get("sha256"), str) for k in ("prediction", "measured_fit"))
          and isinstance(d["prediction"].get("comparison_sha256"), str)
          and isinstance(d.get("verdicts"), list) and all(_row_ok(r) for r in d["verdicts"]))
    if not ok:
        raise UserError(f"{name}: not a depthwidth forms verdict file (format {FORMS_VERDICT_FORMAT!r}, version "
                        f"{FORMS_VERDICT_VERSION}, with prediction {{path, sha256, comparison_sha256}}, measured_fit "
                        "{path, sha256} and verdict rows; written by depthwidth predict --check FORMS_PREDICTION --out)")
    return d


def _read(path: Path) -> tuple[bytes, Any]:
    try:
        raw = path.read_bytes()
        return raw, json.loads(raw)
    except (OSError, ValueError):
        return b"", None


def forms_record(cmp_path: str) -> list[dict[str, Any]]:
    """Per forms prediction made from the comparison at ``cmp_path`` (matched by the comparison's
    sha256): {"prediction" (path under the root), "pairs", "verdicts": [{"verdict_file",
    "measured_fit", "rows"}]}. Unreadable prediction files are skipped (they are not this
    comparison's record); a forms verdict of one of these predictions is checked: UserError
    (one line) when it is malformed, or its prediction or measured fit changed since it was
    written."""
    cmp_file = Path(cmp_path).resolve()
    sha = _sha256(cmp_file.read_bytes())
    pdir = predictions_dir(cmp_file)
    root = pdir.parent.parent
    preds: dict[str, dict[str, Any]] = {}
    for f in sorted(pdir.glob("*.json")) if pdir.is_dir() else []:
        raw, d = _read(f)
        if isinstance(d, dict) and d.get("format") == FORMS_PREDICTION_FORMAT \
                and (d.get("comparison") or {}).get("sha256") == sha:
            preds[_sha256(raw)] = {"prediction": _rel(f, root), "path": f,
                                   "pairs": [list(p["pair"]) for p in d.get("predictions", [])], "verdicts": []}
    for vf in sorted((pdir / VERDICTS).glob("*.json")) if preds else []:
        _, d = _read(vf)
        if not is_forms_verdict(d):
            continue  # a verdict of a one-form law's prediction (fits.validation)
        name = _rel(vf, root)
        v = check_forms_verdict(d, name)
        p = v["prediction"]
        redo = f"rerun depthwidth predict --check {p['path']} --fit {v['measured_fit']['path']} --out {name}"
        entry = preds.get(p["sha256"])
        if entry is None:
            if p["comparison_sha256"] == sha or any((root / p["path"]).resolve() == e["path"] for e in preds.values()):
                raise UserError(f"{name}: its prediction {p['path']} is missing or has changed since the verdict "
                                f"was written (sha256 {p['sha256'][:12]}): {redo}")
            continue  # the verdict of another comparison's prediction
        check_input(name, "measured fit", v["measured_fit"], root, redo)
        entry["verdicts"].append({"verdict_file": name, "measured_fit": v["measured_fit"]["path"],
                                  "rows": v["verdicts"]})
    return [{k: e[k] for k in ("prediction", "pairs", "verdicts")} for e in preds.values()]


def _form_text(f: dict[str, Any]) -> str:
    how = f"z {f['z']:+.2f}" if "z" in f else f"P(outcome) {f['probability_of_outcome']:.3g}"
    return f"{f['form']} {f['status']} ({how})"


def _row_text(r: dict[str, Any], verdict_file: str) -> str:
    pair = f"({r['pair'][0]},{r['pair'][1]})"
    m = r.get("measured") or {}
    if r["outcome"] == "not measured":
        return f"{pair} not measured in {verdict_file}"
    if r["outcome"] == "not resolved":
        share = m.get("bootstrap_fraction")
        return f"{pair} not resolved" + (f" (crossing share {share:.3f})" if share is not None else "") \
            + f", no form judged ({verdict_file})"
    if r["outcome"] == "resolved":
        head = f"{pair} resolved, measured N* {format_count(m['N_star'])}"
    else:
        lo, hi = m["N_range"]
        head = (f"{pair} deeper worse over the whole grid (N* above {format_count(hi)})"
                if r["outcome"] == "deeper_worse_throughout"
                else f"{pair} deeper better over the whole grid (N* below {format_count(lo)})")
    text = head + ": " + ", ".join(_form_text(f) for f in r["forms"])
    weights = [f for f in r["forms"] if f.get("updated_weight") is not None]
    if weights:
        text += "; updated weights " + ", ".join(f"{f['form']} {f['updated_weight']:.2f}" for f in weights)
    if r.get("favoured"):
        text += f"; favoured {r['favoured']} (highest predictive likelihood)"
    return f"{text} ({verdict_file})"


def record_texts(record: list[dict[str, Any]]) -> list[str]:
    """One text per prediction of :func:`forms_record`, for query's "forms' out-of-sample record"."""
    out = []
    for e in record:
        pairs = ", ".join(f"({a},{b})" for a, b in e["pairs"])
        name = Path(e["prediction"]).name
        if not e["verdicts"]:
            out.append(f"pre-registered {pairs} in {name} (judged by `predict --check` once measured)")
            continue
        out.append(f"pre-registered in {name}: " + "; ".join(
            _row_text(r, v["verdict_file"]) for v in e["verdicts"] for r in v["rows"]))
    return out


def form_statuses(record: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Per form, its status in every judged pair of the record ("(5,10) fails"), for query's table."""
    out: dict[str, list[str]] = {}
    for e in record:
        for v in e["verdicts"]:
            for r in v["rows"]:
                for f in r["forms"]:
                    out.setdefault(f["form"], []).append(f"({r['pair'][0]},{r['pair'][1]}) {f['status']}")
    return out


def favoured_forms(record: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """{"pair": "(5,10)", "form", "weight", "top_form", "top_weight"} for every resolved pair of the
    record: the favoured form (highest predictive likelihood under the prediction's rule,
    fits.predict_forms) with its updated weight, and the form of highest updated weight (Akaike
    weight x likelihood, normalised), which can differ: a form of low prior weight can predict
    the measurement best."""
    out = []
    for e in record:
        for v in e["verdicts"]:
            for r in v["rows"]:
                f = next((f for f in r["forms"] if f["form"] == r.get("favoured")), None)
                if f is None or f.get("updated_weight") is None:
                    continue
                top = max((x for x in r["forms"] if x.get("updated_weight") is not None),
                          key=lambda x: x["updated_weight"])
                out.append({"pair": f"({r['pair'][0]},{r['pair'][1]})", "form": f["form"], "weight": f["updated_weight"],
                            "top_form": top["form"], "top_weight": top["updated_weight"]})
    return out
