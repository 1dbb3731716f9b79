"""Experiments: what to run and running it, over many runs and workers.

    presets   sweep grids as data (presets/*.toml) -> RunConfigs
    runner    run_sweep / run_local_jobs: every run of a preset trained once, resumable
    claims    claim files: which worker owns an unfinished run
    cli       ``depthwidth train`` / ``presets`` / ``sweep``

A new kind of experiment (a measurement, an ablation of a trained model) is a module here
that writes :class:`depthwidth.records.Record` objects with its own ``kind`` (ARCHITECTURE.md).
"""
