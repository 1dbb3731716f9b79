"""``depthwidth figs``: draw the paper figures from stored results (thin: parse, render, print).

Nothing heavy at module level: matplotlib, pandas and scipy load inside the handler.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from depthwidth import storage
from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.paper_figs import registry
from depthwidth.records import require_results_dir
from depthwidth.theory.cli import SEPRANK_RESULTS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "figs", help="draw the paper figures (PNG + PDF) from a results directory",
        description=f"Draw the law's figures ({', '.join(registry.names(registry.LAW))}; docs/guide/figures.md) "
                    "from the run "
                    "records under --results and a fit file (--fit; computed in memory with the default "
                    "`depthwidth fit` options when omitted). Never trains: regenerates in seconds from stored "
                    "results; a file that already holds the same bytes is left untouched.",
    )
    p.add_argument("--results", required=True, metavar="DIR", help="results directory (holds runs/*/record.json)")
    p.add_argument("--fit", metavar="FIT.json", help="fit file written by `depthwidth fit` (default: fit in memory)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="directory for the PNG and PDF files (default RESULTS/figures; created if missing)")
    add_json_flag(p)
    p.set_defaults(func=_figs)

    q = sub.add_parser("seprank-fig", help="draw fig5 (measured separation rank) from a stored seprank table",
                       description="Draw fig5_measured_separation_rank (PNG + PDF) from the table.json written "
                                   "by `depthwidth theory seprank --table`. Measures nothing.")
    q.add_argument("--table", default=f"{SEPRANK_RESULTS}/table.json", metavar="TABLE.json",
                   help=f"the stored table (default {SEPRANK_RESULTS}/table.json)")
    q.add_argument("--trained", metavar="TRAINED.json",
                   help="trained-network ranks to overlay (`depthwidth seprank-trained --table`; default: the "
                        "trained.json beside --table, if there is one; 'none' for without)")
    q.add_argument("--out", default=f"{SEPRANK_RESULTS}/figures", metavar="DIR",
                   help=f"directory for the PNG and PDF (default {SEPRANK_RESULTS}/figures)")
    add_json_flag(q)
    q.set_defaults(func=_seprank_fig)

    r = sub.add_parser("prediction-fig", help="draw fig7 (a pre-registered prediction vs its measurement)",
                       description="Draw fig7_prediction (PNG + PDF): the law that made a prediction file, the points "
                                   "it was fitted on, each predicted pair's interval and, from the measured fits, "
                                   "the measured transition (docs/results/law-predicts.md). Reads stored files only.")
    r.add_argument("--prediction", required=True, metavar="PREDICTION.json",
                   help="a file written by `depthwidth predict --out` (the fit it names must be unchanged)")
    r.add_argument("--measured", nargs="*", default=[], metavar="FIT.json",
                   help="fit files of the predicted pairs' records (`depthwidth fit`), e.g. results/predict-36/fit.json")
    r.add_argument("--out", default=None, metavar="DIR",
                   help="directory for the PNG and PDF (default: figures/ beside the prediction file)")
    add_json_flag(r)
    r.set_defaults(func=_prediction_fig)

    f = sub.add_parser("forms-fig", help="draw fig8 (every law form on the transition points, with a forms prediction)",
                       description="Draw fig8_law_forms (PNG + PDF) from a form comparison (`fit --compare-forms`), "
                                   "optionally with a forms prediction (`predict --forms`) and the measured fit of its "
                                   "pair (docs/results/which-law.md). Reads stored files only.")
    f.add_argument("--comparison", required=True, metavar="FORMS.json", help="a file written by `fit --compare-forms`")
    f.add_argument("--prediction", default=None, metavar="PREDICTION.json",
                   help="a forms prediction (`predict --forms --out`) to draw each form's predicted interval")
    f.add_argument("--measured", default=None, metavar="FIT.json", help="the fit of the predicted pair's records")
    f.add_argument("--out", default=None, metavar="DIR",
                   help="directory for the PNG and PDF (default: figures/ beside the comparison)")
    add_json_flag(f)
    f.set_defaults(func=_forms_fig)


def _forms_fig(args: argparse.Namespace) -> int:
    # matplotlib and numpy: only when drawing
    from depthwidth.paper_figs import forms_fig

    out = args.out or str(Path(args.comparison).parent / "figures")
    _check_figure_dir(out)
    files = forms_fig.draw(args.comparison, args.prediction, args.measured, out)
    emit(args, {"comparison": args.comparison, "prediction": args.prediction, "measured": args.measured,
                "figures": files}, "wrote " + ", ".join(files))
    return 0


def _prediction_fig(args: argparse.Namespace) -> int:
    # matplotlib and numpy: only when drawing
    from depthwidth.paper_figs import prediction_fig

    out = args.out or str(Path(args.prediction).parent / "figures")
    _check_figure_dir(out)
    files = prediction_fig.draw(args.prediction, args.measured, out)
    emit(args, {"prediction": args.prediction, "measured": args.measured, "figures": files},
         "wrote " + ", ".join(files))
    return 0


def _seprank_fig(args: argparse.Namespace) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.paper_figs import seprank_fig

    trained = args.trained
    if trained is None:
        beside = Path(args.table).with_name("trained.json")
        trained = str(beside) if beside.is_file() else None
    elif trained.lower() == "none":
        trained = None
    files = seprank_fig.draw(args.table, args.out, trained)
    emit(args, {"table": args.table, "trained": trained, "figures": files}, "wrote " + ", ".join(files))
    return 0


def _check_figure_dir(out: str) -> None:
    """Refuse, before drawing, a local --out that is a file, lies under one, or lies where nothing
    can be written (the first write would fail after the work, naming a temporary file); a URL
    names an object store, which has no directories."""
    if storage.is_url(out):
        return
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise UserError(f"--out {out} is a file: figures go in a directory")
    above = next((a for a in p.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        raise UserError(f"--out {out}: {above} is a file, not a directory")
    if above is not None:  # a file made and removed there, not the directory: a refused command leaves nothing
        try:
            tempfile.TemporaryFile(dir=above).close()
        except OSError as e:
            raise UserError(f"--out {out}: cannot write in {above} ({e.strerror})") from None


def _figs(args: argparse.Namespace) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.paper_figs.make import render

    require_results_dir(args.results)  # before --out, which is derived from it
    out = args.out or f"{str(args.results).rstrip('/')}/figures"
    _check_figure_dir(out)
    rep = render(args.results, args.fit, out)
    n_written = sum(f["written"] for f in rep["figures"])
    lines = [f"{len(rep['figures'])} figures (PNG + PDF) in {rep['out_dir']} ({n_written} written, "
             f"{len(rep['figures']) - n_written} unchanged) in {rep['wall_s']:.1f} s; fit: {rep['fit_source']}"]
    if rep["law"] is not None:
        lines.append(f"law: {rep['law_text']}")
    lines += [f"note: {n}" for n in rep["notes"]]
    for f in rep["figures"]:
        lines.append(f"  {f['png']}\n  {f['pdf']}\n    {f['caption']}")
    emit(args, rep, "\n".join(lines))
    return 0
