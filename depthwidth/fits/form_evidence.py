"""What the form comparisons say about a one-form law (issue "Which law?", item 6).

`query --fit X.json` answers from X's law, which has one form (linear-depth for every fit made
before forms existed). When the same records were later pooled into a form comparison
(`fit --also ... --compare-forms`, :mod:`depthwidth.fits.compare`), that comparison is evidence
about this law's form, and the answer should carry it: a linear law answered alone, with the
log-depth and saturating forms fitting better on the pooled table, says more than the data do.

Which comparisons count: every ``*.forms.json`` one folder below the folder that holds the fit's
results directory (``results/law-long/fit.json`` -> ``results/*/*.forms.json``, the same place
:func:`depthwidth.fits.validation.predictions_dir` looks in), whose own fit file (``X.forms.json``
-> ``X.json``) read every results directory this fit read, as ``--results`` or ``--also``. The comparison
beside the fit itself is not listed here: query answers under its forms directly.

When a pre-registered forms prediction from the comparison has been judged
(:mod:`depthwidth.fits.forms_record`), the line adds this form's status in that test.
The Akaike weights are the comparison's own (Burnham & Anderson 2002, 2.9), not recomputed.
Unreadable files are skipped: they are not evidence, and a comparison is never required.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.fits.forms_record import form_statuses, forms_record
from depthwidth.fits.validation import _rel
from depthwidth.records import resolve_stored


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None


def _results_dirs(fit_path: Path, fit: Any) -> list[Path]:
    """The results directories a fit file read: its table's ``results`` and ``also`` (paths stored
    by :func:`depthwidth.records.stored_path`, relative to the fit's folder)."""
    table = fit.get("table") if isinstance(fit, dict) else None
    if not isinstance(table, dict) or not isinstance(table.get("results"), str):
        return []
    stored = [table["results"], *[p for p in table.get("also") or [] if isinstance(p, str)]]
    return [Path(resolve_stored(p, fit_path)).resolve() for p in stored]


def comparisons_covering(fit_path: str, formula: str) -> list[dict[str, Any]]:
    """The form comparisons that pooled the records of the fit at ``fit_path``, each with the
    Akaike weight of the law's form (``formula``, as :class:`depthwidth.fits.forms.LawForm`
    stores it) and of every other form. Returns ``[]`` for a URL, a built-in law or a fit
    that no comparison read. Paths are given relative to the folder of the results
    directories' parent (``results/``'s parent for the committed files)."""
    # numpy (~0.1 s at import) only for a fit file: the built-in law's query imports nothing heavy
    from depthwidth.fits.compare import COMPARE_FORMAT

    fit = Path(fit_path).resolve()
    own = _results_dirs(fit, _read(fit))
    if not own:
        return []
    folder = fit.parent.parent
    root = folder.parent
    beside = fit.with_name(fit.name[:-len(".json")] + ".forms.json") if fit.name.endswith(".json") else None
    out = []
    for cmp_path in sorted(folder.glob("*/*.forms.json")):
        if beside is not None and cmp_path == beside:
            continue
        cmp = _read(cmp_path)
        if not (isinstance(cmp, dict) and cmp.get("format") == COMPARE_FORMAT and isinstance(cmp.get("forms"), list)):
            continue
        pooled_fit = cmp_path.with_name(cmp_path.name[:-len(".forms.json")] + ".json")
        dirs = _results_dirs(pooled_fit, _read(pooled_fit))
        if not set(own) <= set(dirs):
            continue
        forms = [f for f in cmp["forms"] if isinstance(f, dict) and isinstance(f.get("key"), str)]
        this = next((f for f in forms if f.get("formula") == formula), None)
        try:
            tests = form_statuses(forms_record(str(cmp_path))).get(this["key"], []) if this else []
        except UserError as e:  # a broken verdict is the comparison's problem: said, not fatal here
            tests = [f"its record cannot be read ({e})"]
        out.append({
            "comparison": _rel(cmp_path, root),
            "fit": _rel(pooled_fit, root),
            "n_more_directories": len(set(dirs) - set(own)),
            "form": None if this is None else this["key"],
            "form_excluded": None if this is None else bool(this.get("excluded")),
            "aic_weights": {f["key"]: float(f["aic_weight"]) for f in forms},
            "excluded": [f["key"] for f in forms if f.get("excluded")],
            "preferred": cmp.get("preferred"),
            "tests": tests,
        })
    return out


def evidence_line(entry: dict[str, Any]) -> str:
    """One line of text for one comparison of :func:`comparisons_covering`."""
    w = entry["aic_weights"]
    others = ", ".join(f"{k} {v:.2f}" for k, v in w.items() if k != entry["form"] and k not in entry["excluded"])
    excl = f"; excluded: {', '.join(entry['excluded'])}" if entry["excluded"] else ""
    pooled = f"pools this fit's records with {entry['n_more_directories']} more results directories"
    if entry["form"] is None:
        head = f"{entry['comparison']} {pooled}; it did not compare this law's form"
    elif entry["form_excluded"]:
        head = f"{entry['comparison']} {pooled}; there this law's form, {entry['form']}, is excluded"
    else:
        head = (f"{entry['comparison']} {pooled}; there this law's form, {entry['form']}, has Akaike weight "
                f"{w[entry['form']]:.2f}")
    pref = (f"the comparison prefers {entry['preferred']}" if entry["preferred"]
            else "no form is preferred")
    tests = f"; pre-registered test of {entry['form']}: {', '.join(entry['tests'])}" if entry["tests"] else ""
    return (f"forms: {head} (others: {others}{excl}); {pref}{tests}; "
            f"`query --fit {entry['fit']}` answers under every surviving form")
