"""``depthwidth reproduce``: sweep -> fit -> figures -> a short summary, theory next to experiment.

:func:`reproduce` runs the preset's sweep (an executor of :mod:`depthwidth.experiments.executors`,
by default :class:`~depthwidth.experiments.executors.InProcess`: finished runs are skipped), then for each corpus of the preset fits the transition points and
the law ln d_x = a + b·L (:func:`depthwidth.fits.lawfit.build_fit`, written as ``fit.json``),
draws the figures (:func:`depthwidth.paper_figs.make_all`, into ``figures/``) and writes
``summary.json`` and ``summary.md`` (what they compare: :mod:`depthwidth.pipeline.summary`),
all through the output directory's store (:func:`depthwidth.storage.open_results`), which
leaves a file that already holds the same result untouched.

Output layout (``OUT`` = ``--out``, default the results directory): a one-corpus preset writes
``OUT/fit.json``, ``OUT/figures/``, ``OUT/summary.{json,md}``, the places ``depthwidth fit``
and ``depthwidth figs`` use by default; a preset over several corpora writes each corpus's fit
and figures under ``OUT/<corpus>/`` and one summary in ``OUT``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from depthwidth import interrupts, storage
from depthwidth.errors import UserError
from depthwidth.fits.lawfit import build_fit, stored_fit
from depthwidth.fits.options import FitOptions
from depthwidth.paper_figs import make_all
from depthwidth.pipeline.summary import corpus_summary, summary_markdown
from depthwidth.records import stored_path

if TYPE_CHECKING:  # the runner is imported when a sweep runs: not by every CLI start (depthwidth.cli)
    from depthwidth.experiments.executors import Executor


def reproduce(preset, results: str | Path, *, out: str | Path | None = None,
              fit_options: FitOptions = FitOptions(), figures: bool = True,
              executor: Executor | None = None) -> dict[str, Any]:
    """Sweep, fit, figures and summary for ``preset`` (a loaded
    :class:`~depthwidth.experiments.presets.Preset`; module docstring); returns the summary dict.

    ``fit_options`` are the fit's (validated when constructed, so before any training);
    ``executor`` trains the runs without a record (default: an
    :class:`~depthwidth.experiments.executors.InProcess` with default settings; the CLI's comes
    from :func:`depthwidth.experiments.cli.sweep_executor`).

    Keys: preset, results, out, complete (every run has a record and nothing failed), sweep
    (the :class:`~depthwidth.experiments.runner.SweepReport` as a dict), corpora
    ({corpus: per-corpus summary: status, table, pairs, law, warnings, fit_path, figures, ...}),
    files (summary.json, summary.md), written (those of files whose bytes changed: the others were
    left untouched), wall_s. ``results`` and ``out`` may be URLs
    (:mod:`depthwidth.storage`). Raises UserError from the sweep.
    """
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import runner

    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.executors import InProcess

    t0 = time.perf_counter()
    rep = (executor or InProcess()).run(preset, results)  # step 1: every run has a record, or is reported
    interrupts.check()  # a Ctrl-C swallowed by a library in the sweep (jax's gc callback) stops here, not after the figures
    out_root = storage.path(out if out is not None else results)
    groups = runner.group_dirs(preset, results)
    per = {corpus: _fit_and_draw(gdir, out_root if len(groups) == 1 else out_root / storage.path(gdir).name,
                                 fit_options, figures)
           for corpus, gdir in groups.items()}
    summary = {
        "preset": preset.name, "description": preset.description, "results": str(results), "out": str(out_root),
        "complete": rep.complete and not rep.failed, "sweep": rep.to_dict(), "corpora": per,
        "files": [str(out_root / "summary.json"), str(out_root / "summary.md")],
    }
    # Stored without timings, and with paths by the rule of result files (records.stored_path), so
    # regenerating from finished records leaves the file byte-identical from any directory.
    stored = _stored_paths({**summary, "sweep": {k: v for k, v in summary["sweep"].items() if k != "wall_s"}},
                           out_root)
    # Written only when their content changed (floats beyond the last bits another CPU's sums
    # move: records.SAME_RTOL): a rerun over finished records touches nothing tracked.
    store = storage.open_results(out_root)
    changed = [store.write_json_if_changed("summary.json", stored)]
    summary["wall_s"] = time.perf_counter() - t0
    changed.append(store.write_if_changed("summary.md", summary_markdown(summary)))
    summary["written"] = [f for f, w in zip(summary["files"], changed) if w]  # not stored: the console's
    return summary


def _stored_paths(summary: dict[str, Any], base: Path) -> dict[str, Any]:
    """The summary with every path it names as stored in ``base`` (summary.json's folder; records.stored_path)."""
    rel = lambda p: stored_path(p, base) if p else p  # noqa: E731
    corpora = {}
    for corpus, c in summary["corpora"].items():
        c = {**c, "results": rel(c["results"]), "fit_path": rel(c["fit_path"]),
             "figures": [rel(f) for f in c["figures"]]}
        if isinstance(c.get("table"), dict):
            c["table"] = {**c["table"], "results": rel(c["table"]["results"])}
        corpora[corpus] = c
    sweep = {**summary["sweep"], "results": rel(summary["sweep"].get("results")),
             "groups": {k: rel(v) for k, v in (summary["sweep"].get("groups") or {}).items()}}
    return {**summary, "results": rel(summary["results"]), "out": rel(summary["out"]),
            "files": [rel(f) for f in summary["files"]], "corpora": corpora, "sweep": sweep}


def _fit_and_draw(results: str, out_dir: Path, options: FitOptions, figures: bool) -> dict[str, Any]:
    """Steps 2 and 3 for one corpus: fit.json from the records, then the figures; either may
    fail with a UserError (every run diverged, one depth only), which the summary reports."""
    # pandas: ~0.5 s at import; query and --help must not pay it
    from depthwidth.fits.table import load_table

    fit = fit_error = fit_path = None
    try:
        fit = build_fit(load_table(results), **options.kwargs())
        store = storage.open_results(out_dir)
        fit_path = str(store.path("fit.json"))
        store.write_json_if_changed("fit.json", stored_fit(fit, fit_path))
    except UserError as e:  # say so, draw what can be drawn
        fit_error = str(e)
    figs: list[str] = []
    figs_error = None
    interrupts.check()
    if figures:
        try:
            figs = [str(p) for p in make_all(results, fit_path, out_dir / "figures", options=options)]
        except UserError as e:
            figs_error = str(e)
    return corpus_summary(results, fit, fit_error, fit_path, figs, figs_error)
