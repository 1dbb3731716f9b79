"""Experiments: what to run and running it, over many runs and workers.

    presets   sweep grids as data (presets/*.toml) -> RunConfigs
    runner    run_sweep / run_local_jobs: every run of a preset trained once, resumable
    executors the one Executor interface and its four executors (in this process, --jobs
              worker processes, Ray tasks, Ray host groups); executor_for picks one
    ray_runner, ray_groups   the Ray executors' machinery
    claims    claim files: which worker owns an unfinished run
    cli       ``depthwidth train`` / ``presets`` / ``seprank-trained``, and the sweep options

A new kind of experiment (a measurement, an ablation of a trained model) is a module here
that writes :class:`depthwidth.records.Record` objects with its own ``kind`` (ARCHITECTURE.md).
"""
