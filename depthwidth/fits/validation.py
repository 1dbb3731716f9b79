"""A law's out-of-sample record: the pre-registered predictions made from a fit file and their
measured verdicts, found beside the fit, so that ``depthwidth query --fit`` says how its law fared.

Where they are found. A fit file ``ROOT/results/NAME/fit.json`` has its predictions in
``ROOT/results/predictions/*.json`` (files of format "depthwidth-prediction", written once by
``depthwidth predict --out``; :mod:`depthwidth.fits.predict`): those whose ``fit.sha256`` is the
sha256 of the fit file's bytes were made from it. Each prediction's verdicts are in
``ROOT/results/predictions/verdicts/*.json`` (format "depthwidth-verdict", below), written by
``depthwidth predict --fit MEASURED --check PREDICTION --out VERDICT``: the verdict rows of
:func:`depthwidth.fits.predict.verdict` for one measured fit, with the sha256 of the prediction
and of the measured fit. The paths inside both files are relative to ROOT (the directory the
commands were run in, the repository root), so the lookup does not depend on the current directory.
A verdict file holds no time or git revision: rerunning its command rewrites the same bytes.

Verdict file (JSON)::

    format "depthwidth-verdict", version 1
    prediction    {"path", "sha256" (of the prediction file's bytes), "fit_sha256" (its fit.sha256)}
    measured_fit  {"path", "sha256" (of the measured fit file's bytes)}
    verdicts      [verdict rows: pair, status "resolved" | "not resolved", predicted/measured N*, z, ...]
    protocol_differences  [str] | null (fits.predict.protocol_differences)

Per predicted pair the status is "held" (the measured N* inside the predicted 95 % interval: the
registered rule, docs/results/law-predicts.md), "failed" (outside it), "not resolved" (measured,
but the measured fit does not locate the transition) or "not measured" (no verdict file has its
pair). The law's status is "failed" when any pair failed, else "held" when any held, else "not
resolved" or "not measured"; "not tested out of sample" when no prediction was made from the fit.

Bad records give one line (UserError): a prediction file that names this fit's path but another
sha256 (the fit changed after its prediction was registered), a verdict whose prediction or
measured fit has changed or is missing since it was written, a verdict whose prediction was made
from another fit than the verdict says, or a file that is not what its directory holds.

Import-light (stdlib only): it is on the ``depthwidth query`` path.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from depthwidth import storage
from depthwidth.errors import UserError
from depthwidth.fits.law import BUILTIN_LAWS, Law
from depthwidth.fits.options import ASSIGN
from depthwidth.units import format_count

PREDICTION_FORMAT = "depthwidth-prediction"
FORMS_PREDICTION_FORMAT = "depthwidth-forms-prediction"  # fits.predict_forms: one pair under every law form
PREDICTION_VERSION = 1
FORMS_VERDICT_FORMAT = "depthwidth-forms-verdict"  # fits.forms_record: the verdict of a forms prediction
VERDICT_FORMAT = "depthwidth-verdict"
VERDICT_VERSION = 1
VERDICTS = "verdicts"  # the folder of verdict files, inside the predictions folder
# The reason verdict() gives a pair its measured fit does not hold (fits.predict.NO_SUCH_PAIR).
NO_SUCH_PAIR = "the measured fit has no such pair: its records lack one of the depths"


def read_document(path: str, what: str = "prediction file") -> Any:
    """The parsed JSON at ``path`` (a local path or URL); UserError (one line) when it is absent
    or unreadable, naming it as ``what``."""
    try:
        return json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        raise UserError(f"{what} not found: {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read {what} {path}: {e}") from None


def read_prediction(path: str) -> dict[str, Any]:
    """A prediction file as a dict; UserError (one line) when absent, unreadable or malformed."""
    d = read_document(path)
    if not isinstance(d, dict) or d.get("format") != PREDICTION_FORMAT or d.get("version") != PREDICTION_VERSION:
        raise UserError(f"{path}: not a depthwidth prediction file (format {PREDICTION_FORMAT!r}, "
                        f"version {PREDICTION_VERSION})")
    fit = d.get("fit")
    if not (isinstance(fit, dict) and isinstance(fit.get("path"), str) and isinstance(fit.get("sha256"), str)):
        raise UserError(f"{path}: 'fit' must name the fit the prediction was made from ({{\"path\", \"sha256\", ...}})")
    preds = d.get("predictions")
    if not isinstance(preds, list) or not preds or not all(_well_formed(p) for p in preds):
        raise UserError(f"{path}: 'predictions' must be a non-empty list of pair predictions (pair [L_s, L_d] "
                        "with 1 <= L_s < L_d, positive L and n_star, ln_n_star = ln(n_star), sigma_ln_n_star >= 0 or "
                        f"null, ci95 [lo, hi] with 0 < lo <= n_star <= hi or null, depth_convention one of "
                        f"{', '.join(ASSIGN)})")
    pairs = [tuple(p["pair"]) for p in preds]
    if len(set(pairs)) < len(pairs):
        twice = next(q for q in pairs if pairs.count(q) > 1)
        raise UserError(f"{path}: pair ({twice[0]},{twice[1]}) is predicted more than once")
    return d


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _well_formed(p: Any) -> bool:
    """One pair prediction as :func:`predict` writes it; a hand-edited file must not pass with a
    pair the command line refuses (L_s >= L_d), a negative sigma (it flips z's sign) or N* <= 0."""
    if not isinstance(p, dict) or "ci95" not in p:
        return False
    pair, ci, sigma = p.get("pair"), p.get("ci95"), p.get("sigma_ln_n_star")
    return (isinstance(pair, list) and len(pair) == 2
            and all(isinstance(v, int) and not isinstance(v, bool) for v in pair) and 1 <= pair[0] < pair[1]
            and _num(p.get("n_star")) and p["n_star"] > 0 and _num(p.get("ln_n_star"))
            and _num(p.get("L")) and p["L"] > 0
            and abs(p["ln_n_star"] - math.log(p["n_star"])) <= 1e-9 * max(1.0, abs(p["ln_n_star"]))
            and (sigma is None or (_num(sigma) and sigma >= 0))
            and (ci is None or (isinstance(ci, list) and len(ci) == 2 and all(_num(v) for v in ci)
                                and 0 < ci[0] <= p["n_star"] <= ci[1]))
            and p.get("depth_convention") in ASSIGN)




def _sha256(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def check_input(name: str, what: str, entry: dict[str, str], root: Path, redo: str) -> None:
    """Check one input a verdict file names, ``entry`` = {"path" (under ``root``), "sha256"},
    against what the verdict recorded. ``name``: the verdict file, as shown;
    ``what``: the input ("prediction", "measured fit"); ``redo``: the command that rewrites the
    verdict. Raises UserError (one line) when the file cannot be read or its sha256 differs, so
    that a verdict never describes inputs that are no longer there (one-form and forms verdicts,
    the docs' verdict block)."""
    try:
        raw = (root / entry["path"]).read_bytes()
    except OSError:
        raise UserError(f"{name}: its {what} {entry['path']} cannot be read under {root}") from None
    if _sha256(raw) != entry["sha256"]:
        raise UserError(f"{name}: its {what} {entry['path']} has changed since the verdict was written "
                        f"(sha256 differs): {redo}")


def verdict_record(prediction: dict[str, Any], prediction_path: str, prediction_raw: bytes,
                   measured_path: str, measured_raw: bytes, rows: list[dict[str, Any]],
                   differences: list[str] | None) -> dict[str, Any]:
    """The verdict file (module docstring) of ``rows`` (:func:`depthwidth.fits.predict.verdict`
    of the prediction against the measured fit): paths as given, the files' sha256s."""
    return {"format": VERDICT_FORMAT, "version": VERDICT_VERSION,
            "prediction": {"path": str(prediction_path), "sha256": _sha256(prediction_raw),
                           "fit_sha256": prediction["fit"]["sha256"]},
            "measured_fit": {"path": str(measured_path), "sha256": _sha256(measured_raw)},
            "verdicts": rows, "protocol_differences": differences}


def _read_json(path: Path, what: str) -> tuple[bytes, Any]:
    try:
        raw = path.read_bytes()
        return raw, json.loads(raw)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read {what} {path}: {e}") from None


def _row_ok(v: Any) -> bool:
    """One verdict row as fits.predict.verdict writes it (the fields query prints)."""
    if not (isinstance(v, dict) and isinstance(v.get("pair"), list) and len(v["pair"]) == 2
            and all(isinstance(x, int) for x in v["pair"]) and v.get("status") in ("resolved", "not resolved")
            and _num(v.get("predicted_n_star"))):
        return False
    if v["status"] == "not resolved":
        return isinstance(v.get("reason"), str)
    return (_num(v.get("measured_n_star")) and v.get("inside_predicted_ci95") in (True, False, None)
            and (v.get("z") is None or _num(v["z"])))


def read_verdict(path: Path) -> dict[str, Any]:
    """A verdict file as a dict; UserError (one line) when unreadable or malformed."""
    return _verdict_of(_read_json(path, "verdict file")[1], path)


def _verdict_of(d: Any, path: Path) -> dict[str, Any]:
    """``d``, parsed from the verdict file ``path``, when well formed; UserError (one line) otherwise."""
    ok = (isinstance(d, dict) and d.get("format") == VERDICT_FORMAT and d.get("version") == VERDICT_VERSION
          and all(isinstance(d.get(k), dict) and isinstance(d[k].get("path"), str)
                  and isinstance(d[k].get("sha256"), str) for k in ("prediction", "measured_fit"))
          and isinstance(d["prediction"].get("fit_sha256"), str)
          and isinstance(d.get("verdicts"), list) and all(_row_ok(v) for v in d["verdicts"]))
    if not ok:
        raise UserError(f"{path}: not a depthwidth verdict file (format {VERDICT_FORMAT!r}, version {VERDICT_VERSION}, "
                        "with prediction {path, sha256, fit_sha256}, measured_fit {path, sha256} and verdict rows; "
                        "written by depthwidth predict --check --out)")
    return d


def predictions_dir(fit_path: str | Path) -> Path:
    """Where the predictions made from a fit file are kept: results/predictions beside the fit's
    results directory (``results/law-long/fit.json`` -> ``results/predictions``)."""
    return Path(fit_path).resolve().parent.parent / "predictions"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _predictions_of(fit: Path, sha: str, pdir: Path, root: Path) -> list[tuple[Path, str, dict]]:
    """(path, sha256, parsed) of every prediction file in ``pdir`` made from the fit (module
    docstring); UserError for one that names this fit's path with another sha256."""
    out = []
    for f in sorted(pdir.glob("*.json")):
        raw, d = _read_json(f, "prediction file")
        if not (isinstance(d, dict) and d.get("format") == PREDICTION_FORMAT):
            continue  # another kind of file: not a prediction
        d = read_prediction(str(f))
        if d["fit"]["sha256"] == sha:
            out.append((f, _sha256(raw), d))
        elif _same_file(root / d["fit"]["path"], fit):
            raise UserError(f"{_rel(f, root)} was pre-registered from {d['fit']['path']} with sha256 {d['fit']['sha256'][:12]}, "
                            f"but that file now has sha256 {sha[:12]}: the fit changed after its prediction was made, "
                            "so its out-of-sample record no longer applies (restore the registered fit, e.g. "
                            f"git checkout -- {d['fit']['path']}, or write the new fit elsewhere)")
    return out


def _check_verdict(vf: Path, v: dict, preds: dict[str, tuple[Path, str, dict]], root: Path) -> None:
    """UserError unless the verdict's prediction (found by sha256 among ``preds``, else at its
    path under ``root``) is unchanged and made from the fit the verdict names, and its measured
    fit is unchanged since the verdict was written."""
    p, name = v["prediction"], _rel(vf, root)
    redo = f"rerun depthwidth predict --fit {v['measured_fit']['path']} --check {p['path']} --out {name}"
    got = preds.get(p["sha256"])
    if got is None:  # a prediction of another fit, or one that changed: read it where the verdict says
        try:
            raw = (root / p["path"]).read_bytes()
        except OSError:
            raw = b""
        if _sha256(raw) == p["sha256"]:
            got = (root / p["path"], p["sha256"], read_prediction(str(root / p["path"])))
    if got is None:
        raise UserError(f"{name}: its prediction {p['path']} is missing or has changed since the verdict was written "
                        f"(sha256 {p['sha256'][:12]}): {redo}")
    if got[2]["fit"]["sha256"] != p["fit_sha256"]:
        raise UserError(f"{name} says its prediction was made from the fit with sha256 {p['fit_sha256'][:12]}, but "
                        f"{p['path']} names the fit {got[2]['fit']['path']} with sha256 {got[2]['fit']['sha256'][:12]}")
    check_input(name, "measured fit", v["measured_fit"], root, redo)


def _entry(pred_file: str, pred: dict, row: dict | None, verdict_file: str | None, measured: str | None) -> dict:
    """One predicted pair's record for query's JSON: its status (module docstring) and numbers."""
    e = {"prediction": pred_file, "pair": pred["pair"], "predicted_n_star": pred["n_star"],
         "predicted_ci95": pred["ci95"], "verdict_file": verdict_file, "measured_fit": measured,
         "measured_n_star": None, "measured_ci95": None, "z": None, "z_ci95": None, "non_normal": None,
         "conservative_z": False, "reason": None}
    if row is None:
        return {**e, "status": "not measured"}
    if row["status"] != "resolved":
        return {**e, "status": "not resolved", "reason": row["reason"], "measured_n_star": row.get("measured_n_star")}
    inside = row.get("inside_predicted_ci95")
    return {**e, "status": {True: "held", False: "failed", None: "measured"}[inside],
            "measured_n_star": row["measured_n_star"], "measured_ci95": row.get("measured_ci95"),
            "z": row.get("z"), "z_ci95": row.get("z_ci95"), "non_normal": row.get("non_normal"),
            "conservative_z": bool(row.get("non_normal") and row.get("z_ci95") is not None
                                   and (row.get("sigma_ln_measured_ci95") or 0) > (row.get("sigma_ln_measured") or 0))}


def _law_status(entries: list[dict]) -> str:
    states = {e["status"] for e in entries}
    if not entries:
        return "not tested out of sample"
    return next((s for s in ("failed", "held", "measured", "not resolved") if s in states), "not measured")


def law_validation(spec: str, law: Law) -> dict[str, Any]:
    """The out-of-sample record of the law ``query --fit SPEC`` reads (module docstring):
    {"status", "text" (the one line query prints), "fit_sha256", "predictions": [per pair:
    prediction, pair, status, predicted_n_star, predicted_ci95, measured_n_star, measured_ci95, z,
    z_ci95, non_normal, conservative_z (true where the measured bootstrap is far from normal and
    z_ci95, the smaller distance, is to be read beside z: predict --check's caution), verdict_file,
    measured_fit, reason]}. A built-in law gets status "published": it is the paper's fit, which
    this project has not tested at the paper's depths.
    UserError (one line) for the bad records of the module docstring."""
    if spec in BUILTIN_LAWS:
        lo, hi = law.depth_range or (None, None)
        depths = f" at depths {lo:g}-{hi:g}" if lo is not None else ""
        return {"status": "published", "fit_sha256": None, "predictions": [],
                "text": f"validation: the paper's own fit{depths} ({law.source.split(',')[0]}); not tested by "
                        "this project at that scale"}
    if storage.is_url(spec):
        return {"status": "not looked up", "fit_sha256": None, "predictions": [],
                "text": "validation: not looked up (predictions are searched beside a local fit file only)"}
    fit = Path(spec)
    sha = _sha256(fit.read_bytes())
    pdir = predictions_dir(fit)
    root = pdir.parent.parent
    preds = {s: (f, s, d) for f, s, d in (_predictions_of(fit, sha, pdir, root) if pdir.is_dir() else [])}
    rows: dict[tuple[str, tuple[int, int]], list[tuple[dict, str, str]]] = {}
    for vf in sorted((pdir / VERDICTS).glob("*.json")) if preds else []:
        _, d = _read_json(vf, "verdict file")
        if isinstance(d, dict) and d.get("format") == FORMS_VERDICT_FORMAT:
            continue  # the verdict of a forms prediction (fits.forms_record), not of a one-form law's
        v = _verdict_of(d, vf)
        if v["prediction"]["fit_sha256"] != sha and v["prediction"]["sha256"] not in preds:
            continue  # the verdict of another fit's prediction
        _check_verdict(vf, v, preds, root)
        for r in v["verdicts"]:
            if r.get("reason") != NO_SUCH_PAIR:
                rows.setdefault((v["prediction"]["sha256"], tuple(r["pair"])), []).append(
                    (r, _rel(vf, root), v["measured_fit"]["path"]))
    entries = []
    for s, (f, _, d) in sorted(preds.items(), key=lambda kv: str(kv[1][0])):
        for p in d["predictions"]:
            found = rows.get((s, tuple(p["pair"]))) or [(None, None, None)]
            entries += [_entry(_rel(f, root), p, r, vf, m) for r, vf, m in found]
    status = _law_status(entries)
    return {"status": status, "fit_sha256": sha, "predictions": entries,
            "text": status_line(entries, _rel(pdir, root))}


def _rel(p: Path, root: Path) -> str:
    return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)


def _pair_text(e: dict) -> str:
    pair = f"({e['pair'][0]},{e['pair'][1]})"
    ci = e["predicted_ci95"]
    pred = f"predicted {format_count(e['predicted_n_star'])}" + (
        f" [{format_count(ci[0])}, {format_count(ci[1])}]" if ci else "")
    if e["status"] == "not measured":
        return f"{pair} not yet measured, {pred}"
    if e["status"] == "not resolved":
        return f"{pair} not resolved ({e['reason']}), {pred}"
    z = "" if e["z"] is None else f", z = {e['z']:+.2f}"
    if e.get("conservative_z"):
        z += f" (conservative z {e['z_ci95']:+.2f}: the measured bootstrap is far from normal)"
    return f"{pair} {e['status']}, measured {format_count(e['measured_n_star'])} vs {pred}{z}"


def status_line(entries: list[dict], where: str) -> str:
    """The one line ``query`` prints under the law line (module docstring)."""
    if not entries:
        return f"validation: not tested out of sample (no pre-registered prediction from this fit in {where})"
    files = sorted({e["prediction"] for e in entries})
    return f"validation: pre-registered {'; '.join(_pair_text(e) for e in entries)} ({', '.join(files)})"
