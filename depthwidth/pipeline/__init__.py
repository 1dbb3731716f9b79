"""The top layer: ``reproduce`` = sweep -> fit -> figures -> summary, for one preset; and
refinement, which alternates fitting and training.

    run.reproduce(preset, results, out=, fit_options=FitOptions(), figures=, executor=)
    summary.compare_law / pair_rows / corpus_summary / summary_text / summary_markdown
    refine.proposals / round_preset / refine_after_grid   ``sweep --refine``: widths added inside
              each transition's bracket, round by round, from the records alone
    cli       ``depthwidth sweep`` (with ``--refine``) and ``depthwidth reproduce``
    registry.KINDS   every experiment kind with its parts (measure, fit, figures, command, results)
    exp       ``depthwidth exp NAME``, one command per kind (``exp_<name>.py``)

Every layer below it (experiments, fits, paper_figs, records) is imported here, and nothing
below imports this package (ARCHITECTURE.md). Like the other subpackages' this file imports
nothing: re-exporting ``run.reproduce`` here loaded numpy (through fits.lawfit) whenever the
parser was built; without numpy ``depthwidth query`` takes 0.31 s, not 0.51 s (measured).
"""
