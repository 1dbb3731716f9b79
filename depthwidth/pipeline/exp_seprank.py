"""``depthwidth exp seprank``: the measured separation rank — measure the missing tables, summarise, draw fig5.

Steps: (1) ``RESULTS/table.json`` (random integer weights,
:func:`depthwidth.theory.seprank.write_table`) is measured when it is missing or incomplete, after
its time estimate (refused above 10 minutes without ``--allow-long``); ``RESULTS/trained.json``
(a short training run on text, :func:`depthwidth.experiments.seprank_train.write_table`) when it
is missing and ``--with-trained`` is given; a stored table is never measured again. (2) The
stored tables are summarised (:func:`depthwidth.fits.seprank.summarise`). (3) fig5 is drawn from
them (:mod:`depthwidth.paper_figs.seprank_fig`; the trained ranks as crosses when trained.json is
there). The documented commands that run one part each stay: ``depthwidth theory seprank
--table``, ``depthwidth seprank-trained --table``, ``depthwidth seprank-fig``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from depthwidth.console import emit

HELP = "measured separation rank of the analysed attention network (random and trained weights) vs the bounds"
DESCRIPTION = (
    "Levine et al. 2020 (arXiv 2006.12467) bound the separation rank of a depth-L self-attention network "
    "(softmax, LayerNorm and feed-forward removed) of width d_x by the counting bound C(3^L + d_x, d_x). "
    "This measures the exact grid-tensor rank (modulo two primes) of such networks with random integer "
    "weights for the table of shapes in docs/results/seprank.md (RESULTS/table.json; ~40 min: "
    "--allow-long), and with "
    "--with-trained the same shapes after a short training run on text (RESULTS/trained.json), summarises "
    "both and draws fig5 next to the bounds. Stored tables are not measured again. The parts also run "
    "alone: depthwidth theory seprank --table, depthwidth seprank-trained --table, depthwidth seprank-fig.")
TABLE, TRAINED = "table.json", "trained.json"


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--allow-long", action="store_true",
                   help="measure table.json when it is missing although that is estimated above 10 minutes")
    p.add_argument("--with-trained", action="store_true",
                   help="also train and measure trained.json when it is missing (the corpus is needed)")
    p.add_argument("--data-dir", metavar="DIR", help="folder holding the corpus files (default $DEPTHWIDTH_DATA)")


def _stored(path: Path) -> dict[str, Any] | None:
    """The stored table at ``path`` when it is there and complete, else None."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and doc.get("rows") and doc.get("complete", True) else None


def _log(args: argparse.Namespace, tag: str):
    def progress(i: int, n: int, r: dict[str, Any]) -> None:
        if not args.no_progress:
            print(f"[{tag}] {i}/{n} L={r['n_layer']} d={r['d_model']} H={r['n_head']} residual={r['residual']}",
                  file=sys.stderr, flush=True)
    return progress


def measure(args: argparse.Namespace) -> list[str]:
    """Step 1 (module doc); returns the names of the tables measured now."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory import seprank

    done = []
    results = Path(args.results)
    if _stored(results / TABLE) is None:
        seprank.check_time(seprank.table_seconds(), allow_long=args.allow_long)
        seprank.write_table(str(results), progress=_log(args, "seprank"))
        done.append(TABLE)
    if args.with_trained and _stored(results / TRAINED) is None:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.experiments import seprank_train

        seprank_train.write_table(str(results), data_dir=args.data_dir, progress=_log(args, "seprank-trained"))
        done.append(TRAINED)
    return done


def run(args: argparse.Namespace) -> int:
    """Measure what is missing, summarise, draw, print (``--json``: results, measured, summary,
    figures). UserError (one line) for a refused estimate or a malformed table."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.fits.seprank import summarise, summary_text

    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.paper_figs import seprank_fig

    measured = measure(args)
    results = Path(args.results)
    trained_path = results / TRAINED if (results / TRAINED).is_file() else None
    table = seprank_fig.load(results / TABLE)
    summary = summarise(table, seprank_fig.load(trained_path) if trained_path else None)
    figures = [] if args.no_figure else seprank_fig.draw(results / TABLE, args.out or str(results / "figures"),
                                                        trained_path)
    out = {"results": str(results), "measured": measured, "summary": summary, "figures": figures}
    text = "\n".join([f"exp seprank: measured now: {', '.join(measured) or 'nothing'} (tables in {results})",
                      summary_text(summary), *(f"figure: {f}" for f in figures)])
    emit(args, out, text)
    return 0
