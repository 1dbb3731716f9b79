"""The top layer: ``reproduce`` = sweep -> fit -> figures -> summary, for one preset.

    run.reproduce(preset, results, out=, fit_options=FitOptions(), figures=, sweep_kwargs=)
    summary.compare_law / pair_rows / corpus_summary / summary_text / summary_markdown
    cli       ``depthwidth reproduce``

Every layer below it (experiments, fits, paper_figs, records) is imported here, and nothing
below imports this package (ARCHITECTURE.md).
"""

from depthwidth.pipeline.run import reproduce

__all__ = ["reproduce"]
