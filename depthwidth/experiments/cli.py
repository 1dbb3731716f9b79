"""``depthwidth train``, ``depthwidth presets`` and ``depthwidth seprank-trained`` (thin: parse,
call, print), and the options of a sweep.

Nothing heavy at module level: the runner imports jax (through the engine) only when it trains.
The ``sweep`` command itself is registered once, by :mod:`depthwidth.pipeline.cli` (its
``--refine`` fits between rounds of training, so it lives in the layer above both experiments
and fits), as is ``reproduce``; both take the options of :func:`sweep_args` and turn them into
one executor (:mod:`depthwidth.experiments.executors`) with :func:`sweep_executor`, through the
steps here (:func:`start_sweep`, :func:`end_sweep`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from depthwidth import storage
from depthwidth.console import add_json_flag, emit
from depthwidth.errors import UserError
from depthwidth.hostcpu import add_devices_flag
from depthwidth.theory.cli import SEPRANK_RESULTS
from depthwidth.units import format_count, parse_float, parse_int, parse_int_list

DEFAULT_RESULTS = "results/<preset>"


def default_results(preset_name: str, cwd: str | Path | None = None) -> str:
    """Where ``reproduce`` puts a preset's results when ``--results`` is not given (docs/guide/sweeps.md,
    "Where results go"):

    1. inside a depthwidth checkout (the git root of the working directory holds this package's
       ``pyproject.toml``): that checkout's ``results/<preset>``, whichever tree the package
       was installed from (issue 40: a run from one clone rewrote the fit of another);
    2. outside any checkout: the installed source tree's ``results/<preset>`` when it holds
       committed records (the quick start from elsewhere reuses them, issue 10), else
       ``results/<preset>`` under the working directory.

    Relative to the working directory when it lies below it, else absolute. The caller says
    where, before anything is written (:func:`say_default_results`).
    """
    here = Path(cwd if cwd is not None else os.getcwd()).resolve()
    top = _checkout_root(here)
    if top is None:
        src = Path(__file__).resolve().parents[2]  # <checkout>/depthwidth/experiments/cli.py
        top = src if _is_depthwidth_checkout(src) and (src / "results" / preset_name).is_dir() else here
    rel = os.path.relpath(top / "results" / preset_name, here)
    return rel if not rel.startswith("..") else str(top / "results" / preset_name)


def say_default_results(preset_name: str, results: str) -> None:
    """One stderr line naming the default results directory (absolute), before the sweep writes."""
    print(f"depthwidth: results of preset {preset_name}: {Path(results).resolve()} (the default; "
          "--results DIR to choose)", file=sys.stderr)


def _checkout_root(start: Path) -> Path | None:
    """The git root above ``start`` (a ``.git`` folder, or a worktree's ``.git`` file), if it is a
    depthwidth checkout; else None."""
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d if _is_depthwidth_checkout(d) else None
    return None


def _is_depthwidth_checkout(d: Path) -> bool:
    try:
        return 'name = "depthwidth"' in (d / "pyproject.toml").read_text()
    except OSError:
        return False


def register_train(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train one run and write its result record")
    p.add_argument("--preset", help="sweep preset whose base config to start from (e.g. smoke, cpu); with neither "
                                    "--preset nor --config, the defaults of depthwidth.config.RunConfig")
    p.add_argument("--config", help="a TOML file with [model] [data] [train] [mesh] tables")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a config field (repeatable), e.g. --set model.n_layer=6")
    p.add_argument("--out", required=True, help="results directory (records go to OUT/runs/<run_id>/)")
    p.add_argument("--data-dir", help="directory with the raw corpora (default: $DEPTHWIDTH_DATA)")
    p.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    tracker_args(p)
    p.add_argument("--distributed", action="store_true",
                   help="call jax.distributed.initialize() first, the cluster detected by jax "
                        "(Cloud TPU VMs, SLURM, Open MPI); elsewhere give the next three flags")
    p.add_argument("--coordinator", metavar="HOST:PORT",
                   help="multi-process run: address of process 0, which listens on PORT "
                        "(implies --distributed; with --num-processes and --process-id)")
    p.add_argument("--num-processes", metavar="N", help="multi-process run: number of processes (hosts)")
    p.add_argument("--process-id", metavar="I", help="multi-process run: this process's index, 0..N-1")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_devices_flag(p)
    add_json_flag(p)
    p.set_defaults(func=_train)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("presets", help="list the sweep presets, or show one",
                       description="Without NAME: the built-in presets. With NAME (or a .toml path): its "
                                   "description, grid and runs, validated.")
    p.add_argument("name", nargs="?", metavar="NAME|PATH", help="a preset to show")
    add_json_flag(p)
    p.set_defaults(func=_presets)
    _register_seprank_trained(sub)


def _register_seprank_trained(sub: argparse._SubParsersAction) -> None:
    def num(name, minimum=1):
        return lambda t: parse_int(t, name=name, minimum=minimum)

    p = sub.add_parser("seprank-trained", help="separation rank of a tiny analysed attention net trained on real text",
                       description="Train the analysed network (attention only: softmax, LayerNorm, feed-forward "
                                   "removed) for a few hundred steps on character-level text, round its weights to "
                                   "multiples of 1/64 and 1/256, and measure their exact grid-tensor rank next to "
                                   "the random-weight rank at the same shape and the counting bound "
                                   "(experiments.seprank_train; random weights alone: depthwidth theory seprank). "
                                   "--table writes --out/trained.json.")
    p.add_argument("--layers", type=num("--layers"), help="L, attention layers")
    p.add_argument("--width", type=num("--width"), help="d_x")
    p.add_argument("--heads", type=num("--heads"), default=1, help="H (divides d_x; default 1)")
    p.add_argument("--residual", action="store_true", help="residual connections x + attn(x)")
    p.add_argument("--steps", type=num("--steps"), default=400, help="Adam steps (default 400)")
    p.add_argument("--seed", type=num("--seed", 0), default=0, help="init and batch seed (default 0)")
    p.add_argument("--corpus", default="austen", help="corpus name (default austen; see `depthwidth data info`)")
    p.add_argument("--data-dir", help="directory with the raw corpora (default: $DEPTHWIDTH_DATA)")
    p.add_argument("--table", action="store_true", help="train and measure the whole table into --out/trained.json")
    p.add_argument("--out", default=SEPRANK_RESULTS, help=f"table directory (default {SEPRANK_RESULTS})")
    add_json_flag(p)
    p.set_defaults(func=_seprank_trained)


def _seprank_trained(args: argparse.Namespace) -> int:
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    from depthwidth.experiments import seprank_train as st

    if args.table:
        def progress(i, n, r):
            print(f"[seprank-trained] {i}/{n} L={r['n_layer']} d={r['d_model']} H={r['n_head']} "
                  f"residual={r['residual']}: held-out {r['heldout_loss']:.3f} (unigram {r['unigram_loss']:.3f}), "
                  f"rank {r['trained']['64']['rank']} vs step 0 {r['init']['rank']} vs random {r['random']['rank']}", file=sys.stderr, flush=True)

        doc = st.write_table(args.out, steps=args.steps, seed=args.seed, corpus=args.corpus, data_dir=args.data_dir,
                             progress=progress)
        path = f"{args.out}/trained.json"
        emit(args, {"table": path, "rows": len(doc["rows"])}, f"wrote {path} ({len(doc['rows'])} rows)")
        return 0
    if args.layers is None or args.width is None:
        raise UserError("seprank-trained needs --layers and --width (or --table)")
    spec = st.TrainSpec(args.layers, args.width, args.heads, residual=args.residual, steps=args.steps,
                        seed=args.seed, corpus=args.corpus)
    r = st.measure_trained(st.train(spec, st.load_chars(args.corpus, args.data_dir)))
    emit(args, r, _seprank_trained_text(r))
    return 0


def _seprank_trained_text(r: dict) -> str:
    grids = ", ".join(f"1/{g}: {t['rank']}{' (lower bound)' if t['lower_bound'] else ''}"
                      for g, t in r["trained"].items())
    rnd = r["random"]
    return (f"L={r['n_layer']} d_x={r['d_model']} H={r['n_head']}{' residual' if r['residual'] else ''}, "
            f"{r['steps']} steps on {r['corpus']}: held-out {r['heldout_loss']:.3f} nats/char "
            f"(unigram {r['unigram_loss']:.3f}){'' if r['finite'] else ', diverged (last finite weights)'}\n"
            f"rank of the rounded trained weights {grids}; float64 SVD of the float weights {r['rank_float_trained']}\n"
            f"same run at step 0 (rounded to 1/64): {r['init']['rank']}{' (lower bound)' if r['init']['lower_bound'] else ''}; "
            f"random integer weights: {rnd['rank']}{' (lower bound)' if rnd['lower_bound'] else ''}; counting bound "
            f"C(3^L + d_x, d_x) = {r['counting_bound']} (log3 {r['log3_counting_bound']:.3f}; trained log3 rank "
            f"{r['log3_rank_trained'] if r['log3_rank_trained'] is None else round(r['log3_rank_trained'], 3)}); "
            f"trained vs step 0: {r['trained_vs_init']}, vs random: {r['trained_vs_random']}")


def sweep_args(p: argparse.ArgumentParser, *, results_required: bool) -> None:
    """The options of ``sweep`` (``results_required``) and ``reproduce``: the preset, the results
    directory, the run settings, and, in two groups, the local workers' and Ray's options, which
    :func:`sweep_executor` turns into one executor. ``sweep`` also gets the hidden flags its
    ``--jobs`` child workers are started with (:func:`worker_args`)."""
    p.add_argument("--preset", required=True, metavar="NAME|PATH",
                   help="a built-in preset (smoke, cpu, levine2020; see `depthwidth presets`) or a .toml file")
    if results_required:
        p.add_argument("--results", required=True, metavar="DIR", help="results directory shared by all workers")
    else:
        p.add_argument("--results", metavar="DIR", help=f"results directory (default: {DEFAULT_RESULTS} in the "
                                                        "depthwidth checkout the working directory is in; outside one, "
                                                        "the installed checkout's if it has committed records, else "
                                                        "under the working directory; printed before writing)")
    p.add_argument("--stale-after", default="600", metavar="SECONDS",
                   help="take over a claim whose heartbeat is older than this (default 600)")
    p.add_argument("--data-dir", metavar="DIR", help="folder holding the corpus files (default $DEPTHWIDTH_DATA)")
    p.add_argument("--download", action="store_true",
                   help="fetch missing corpora that have a canonical URL (tinyshakespeare) into the data dir")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="override a config field in every run, e.g. train.steps=100 (repeatable)")
    p.add_argument("--no-progress", action="store_true", help="no per-run progress bars")
    tracker_args(p)
    add_devices_flag(p)
    _local_args(p)
    _ray_args(p)
    if results_required:
        worker_args(p)


def _local_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("workers sharing --results: --jobs on this machine, --worker/--num-workers across "
                             "hosts (claim files; depthwidth.experiments.runner)")
    g.add_argument("--worker", default="0", metavar="I", help="this worker's index, 0..N-1 (default 0)")
    g.add_argument("--num-workers", default="1", metavar="N", help="number of workers sharing --results (default 1)")
    g.add_argument("--jobs", default="1", metavar="J",
                   help="worker processes on this machine (default 1); XLA compiles on one core, so on a "
                        "multi-core CPU a few jobs can shorten a compile-bound sweep of small models")
    g.add_argument("--no-steal", action="store_true",
                   help="train only this worker's own runs, not other workers' unclaimed ones")


# The flags a sweep passes to the worker processes it starts, never typed by a user: hidden from
# --help, parsed like any other. --refine-round, a refinement round's child, is the pipeline's.
WORKER_FLAGS = ("--cpus", "--parent-pid")


def worker_args(p: argparse.ArgumentParser) -> None:
    """The hidden :data:`WORKER_FLAGS` of a ``--jobs`` child worker (:func:`start_sweep` acts on
    them): ``--cpus`` the cores it pins itself to, ``--parent-pid`` the process it dies with."""
    p.add_argument("--cpus", help=argparse.SUPPRESS)
    p.add_argument("--parent-pid", help=argparse.SUPPRESS)


def tracker_args(p: argparse.ArgumentParser) -> None:
    """``--tensorboard`` and ``--wandb``: copies of each run's log (depthwidth.models.trackers)."""
    p.add_argument("--tensorboard", action="store_true",
                   help="also write each run's log as TensorBoard events in its run dir (needs tensorboardX)")
    p.add_argument("--wandb", action="store_true",
                   help="also log each run to Weights & Biases, one W&B run per run id (needs wandb; "
                        "WANDB_PROJECT, WANDB_MODE=offline etc. are read from the environment)")


def trackers_of(args: argparse.Namespace) -> tuple[str, ...]:
    """The trackers the flags ask for, checked (a missing package is a UserError before any work)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.models.trackers import require

    return require(n for n in ("tensorboard", "wandb") if getattr(args, n, False))


def _ray_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Ray (pip install 'depthwidth[ray]'; depthwidth.experiments.ray_runner)")
    g.add_argument("--ray", metavar="ADDRESS|local",
                   help="run each run as a Ray task: 'local' starts a cluster on this machine, else the address "
                        "of a running one (auto, ray://HOST:10001); --results must be a place every node sees "
                        "(a bucket URL, NFS)")
    g.add_argument("--ray-num-cpus", metavar="N", help="CPUs of a --ray local cluster (default: all of this machine's)")
    g.add_argument("--ray-num-cpus-per-run", metavar="X", help="Ray CPUs each run asks for (default 1)")
    g.add_argument("--ray-num-gpus-per-run", metavar="X", help="Ray GPUs each run asks for (default 0)")
    g.add_argument("--ray-resources", action="append", default=[], metavar="NAME=N",
                   help="a custom Ray resource each run asks for, e.g. TPU=4 (repeatable)")
    g.add_argument("--ray-max-retries", metavar="N",
                   help="reruns of a run's task after its worker or node died (default 3; -1: no limit)")
    g.add_argument("--ray-hosts-per-run", metavar="K",
                   help="train each run as K processes joined by jax.distributed, one per bundle of a Ray placement "
                        "group (a model sharded over several hosts; the per-run requests above are per process)")
    g.add_argument("--ray-group-strategy", metavar="S",
                   help="placement strategy of a run's K processes: STRICT_SPREAD (default: one per node), SPREAD, "
                        "PACK (default with --ray local), STRICT_PACK")
    g.add_argument("--ray-env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable of the training processes, e.g. XLA_FLAGS=... (repeatable)")


def ray_options(args: argparse.Namespace):
    """The :class:`~depthwidth.experiments.ray_runner.RayOptions` of ``--ray`` and its flags (the
    one place they are read), or None without ``--ray``; UserError for a Ray flag without --ray
    or a malformed value (local-worker options next to --ray: :func:`~depthwidth.experiments.
    executors.executor_for`)."""
    extra = [f for f, v in (("--ray-num-cpus", args.ray_num_cpus), ("--ray-num-cpus-per-run", args.ray_num_cpus_per_run),
                            ("--ray-num-gpus-per-run", args.ray_num_gpus_per_run),
                            ("--ray-resources", args.ray_resources), ("--ray-max-retries", args.ray_max_retries),
                            ("--ray-hosts-per-run", args.ray_hosts_per_run),
                            ("--ray-group-strategy", args.ray_group_strategy), ("--ray-env", args.ray_env)) if v]
    if args.ray is None:
        if extra:
            raise UserError(f"{extra[0]} needs --ray ADDRESS|local")
        return None
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.ray_runner import RayOptions, parse_env, parse_resources

    def per_run(text, name, default):
        if text is None:
            return default
        v = parse_float(text, name=name, above=float("-inf"))
        if v < 0:
            raise UserError(f"{name} must be >= 0, got {text!r}")
        return v

    if args.ray_group_strategy is not None and args.ray_hosts_per_run in (None, "1"):
        raise UserError("--ray-group-strategy places a run's processes: it needs --ray-hosts-per-run K > 1")
    return RayOptions(
        address=args.ray.strip(),
        num_cpus=None if args.ray_num_cpus is None else parse_int(args.ray_num_cpus, name="--ray-num-cpus", minimum=1),
        cpus_per_run=per_run(args.ray_num_cpus_per_run, "--ray-num-cpus-per-run", 1.0),
        gpus_per_run=per_run(args.ray_num_gpus_per_run, "--ray-num-gpus-per-run", 0.0),
        resources=parse_resources(args.ray_resources),
        max_retries=3 if args.ray_max_retries is None else parse_int(args.ray_max_retries, name="--ray-max-retries",
                                                                      minimum=-1),
        hosts_per_run=1 if args.ray_hosts_per_run is None else parse_int(args.ray_hosts_per_run,
                                                                          name="--ray-hosts-per-run", minimum=1),
        strategy=None if args.ray_group_strategy is None else args.ray_group_strategy.strip().upper(),
        env=parse_env(args.ray_env))


def load(args: argparse.Namespace):
    """The preset of ``--preset`` with the ``--set`` overrides applied."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.presets import load_preset, with_overrides

    return with_overrides(load_preset(args.preset), args.overrides)


def _float(text: str, name: str) -> float:
    return parse_float(text, name=name)


def require_writable_results(results: str) -> None:
    """UserError (one line) for a local ``--results`` that a sweep could not write: a file, a
    path under a file, or on a read-only or unwritable directory. Else the sweep announced its
    runs and failed on the first claim file, in two lines (and on a read-only mount the error
    named a missing claim.json). URLs are left to their first write."""
    if storage.is_file(results):
        raise UserError(f"--results {results} exists and is not a directory")
    if storage.is_url(results):
        return
    p = Path(results).absolute()
    above = next(q for q in (p, *p.parents) if q.exists())
    if not above.is_dir():
        raise UserError(f"--results {results} is under {above}, which is a file, not a directory")
    try:  # a real write says why not: a read-only mount, no permission, or /proc (root may "access" it)
        probe = storage.path(above) / f".depthwidth-write-probe-{os.getpid()}"
        probe.mkdir()
        probe.rmdir()
    except OSError as e:
        raise UserError(f"--results {results}: cannot write in {above}: {e.strerror}") from None


def sweep_executor(args: argparse.Namespace):
    """The :class:`~depthwidth.experiments.executors.Executor` the sweep options
    (:func:`sweep_args`) ask for (:func:`~depthwidth.experiments.executors.executor_for`), its
    :class:`~depthwidth.experiments.executors.SweepSettings` from the shared ones. UserError
    (one line) for a malformed or conflicting option or an unwritable local ``--results``."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.executors import SweepSettings, executor_for

    n = parse_int(args.num_workers, name="--num-workers", minimum=1)
    i = parse_int(args.worker, name="--worker", minimum=0)
    if i >= n:
        raise UserError(f"--worker must be in 0..{n - 1} with --num-workers {n}, got {i}")
    stale = _float(args.stale_after, "--stale-after")
    if args.results:
        require_writable_results(args.results)
    # What a child worker process needs to run the same sweep (--jobs).
    child = ["--preset", args.preset, "--stale-after", args.stale_after]
    child += [x for o in args.overrides for x in ("--set", o)]
    child += ["--data-dir", args.data_dir] if args.data_dir else []
    child += ["--no-steal"] if args.no_steal else []
    child += ["--devices", args.devices] if args.devices is not None else []
    trackers = trackers_of(args)
    child += [f"--{t}" for t in trackers]
    settings = SweepSettings(data_dir=args.data_dir, trackers=trackers, stale_after_s=stale,
                             progress=not args.no_progress and sys.stderr.isatty())
    return executor_for(settings, jobs=parse_int(args.jobs, name="--jobs", minimum=1), worker=i, num_workers=n,
                        steal=not args.no_steal, child_args=tuple(child), ray=ray_options(args))


def download(preset, data_dir: str | None) -> None:
    """Fetch the preset's corpora that have a canonical URL and are missing (``--download``)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.data import corpora

    for name in preset.corpora:
        if name in corpora.CORPORA and corpora.CORPORA[name].url:
            corpora.locate(name, data_dir, download=True)


def _presets(args: argparse.Namespace) -> int:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments import presets

    if args.name is None:
        rows = []
        for name in presets.available():
            p = presets.load_preset(name)
            rows.append({"name": p.name, "n_runs": len(p.runs), "depths": list(p.depths), "seeds": len(p.seeds),
                         "corpora": list(p.corpora), "expected_minutes": p.expected_minutes,
                         # a [refine] table adds runs after the grid (sweep --refine): at most this many
                         "refine_max_runs": p.refine.max_runs if p.refine else None,
                         "description": p.description})
        wide = max(len(r["name"]) for r in rows)  # columns line up whatever the longest name
        text = "\n".join(
            f"{r['name']:<{wide}} {r['n_runs']:>4} runs  depths {','.join(map(str, r['depths']))}  "
            f"{r['seeds']} seed(s)  {','.join(r['corpora'])}"
            + (f"  ~{r['expected_minutes']:g} min" if r["expected_minutes"] else "")
            + (f"  (--refine: up to {r['refine_max_runs']} more)" if r["refine_max_runs"] else "")
            for r in rows)
        emit(args, {"presets": rows}, text + "\n(depthwidth presets NAME shows one)")
        return 0
    p = presets.load_preset(args.name)
    emit(args, p.summary(), _preset_text(p))
    return 0


def _preset_text(p) -> str:
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory.accounting import kaplan_n

    lines = [f"{p.name} ({p.path})", p.description]
    if p.notes:
        lines.append(f"notes: {p.notes}")
    b = p.base
    lines.append(f"base: H={b.model.n_head} T={b.model.seq_len} B={b.train.batch_size} steps={b.train.steps} "
                 f"lr={b.train.lr:g} warmup={b.train.warmup_steps} tokenizer={b.data.tokenizer}"
                 + (f" V={b.data.bpe_vocab_size}" if b.data.tokenizer == "bpe" else ""))
    lines.append(f"grid: {len(p.runs)} runs = {len(p.corpora)} corpora x {len(p.seeds)} seeds x "
                 f"{sum(len(w) for w in p.widths.values())} (depth, width) cells; corpora {', '.join(p.corpora)}")
    for L in p.depths:
        ws = p.widths[L]
        lines.append(f"  L={L:<3} d = {', '.join(map(str, ws))}   N = 12*L*d^2 = "
                     + ", ".join(format_count(kaplan_n(L, d)) for d in ws))
    if p.expected_minutes:
        lines.append(f"expected wall time: ~{p.expected_minutes:g} min")
    return "\n".join(lines)


def start_sweep(args: argparse.Namespace):
    """What the ``sweep`` command does before it trains: pin to ``--cpus`` and die with
    ``--parent-pid`` (a ``--jobs`` child),
    load the preset with its ``--set`` overrides, build the executor (:func:`sweep_executor`)
    and ``--download``. Returns (preset, executor)."""
    if args.cpus:


        try:
            os.sched_setaffinity(0, set(parse_int_list(args.cpus, name="--cpus", minimum=0)))
        except (OSError, AttributeError) as e:
            raise UserError(f"--cpus {args.cpus}: cannot pin to these cores ({e})") from None
    if getattr(args, "parent_pid", None):
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.experiments.runner import die_with_parent

        die_with_parent(parse_int(args.parent_pid, name="--parent-pid", minimum=1))
    preset = load(args)
    executor = sweep_executor(args)
    if args.download:
        download(preset, args.data_dir)
    return preset, executor


def end_sweep(args: argparse.Namespace, rep) -> int:
    """Print the sweep's report (text or ``--json``); the exit code: 1 if a run failed."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.experiments.runner import report_text

    emit(args, rep.to_dict(), report_text(rep))
    return 0 if not rep.failed else 1


# ---------------------------------------------------------------- train (one run)


def _base_config(args):
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth import config as C

    if args.preset and args.config:
        raise UserError("give --preset or --config, not both")
    if args.preset:
        # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
        from depthwidth.experiments.presets import load_preset

        cfg = load_preset(args.preset).base
    elif args.config:
        cfg = C.from_dict(C.load_toml(args.config))
    else:
        cfg = C.RunConfig()
    return C.override(cfg, args.overrides)


def _train(args) -> int:
    cluster = distributed_args(args)
    if blocker := storage.file_in_the_way(args.out):  # as sweep --results: before any work
        where = "" if blocker == str(storage.path(args.out)) else f": {blocker}"
        raise UserError(f"--out {args.out}{where} exists and is not a directory")
    cfg = _base_config(args)
    if args.distributed or cluster:
        # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
        from depthwidth.models.sharding import initialize_distributed

        try:
            initialize_distributed(*(cluster or ()))
        except UserError as e:
            hint = "" if cluster else " (jax found no cluster here; give --coordinator, --num-processes, --process-id)"
            raise UserError(f"{e}{hint}") from None
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.train import train_run

    rec = train_run(cfg, args.out, data_dir=args.data_dir, resume=not args.no_resume,
                    progress=not args.quiet and sys.stderr.isatty(), trackers=trackers_of(args))
    text = (f"{rec['run_id']}: {rec['status']}  test_loss={_f(rec['test_loss'])} val_loss={_f(rec['val_loss'])} "
            f"nats/token  tokens={rec['tokens']:,}  {_f(rec['tokens_per_s'], '.0f')} tokens/s  "
            f"mfu={_f(rec['mfu'], '.3f')}  -> {args.out}/runs/{rec['run_id']}/record.json")
    for note in (rec.get("mfu_warning"), rec.get("diverged_reason")):
        if note:
            text += f"\n  {note}"
    emit(args, rec, text)
    return 0 if rec["status"] == "finished" else 1


def distributed_args(args) -> tuple[str, int, int] | None:
    """(coordinator, num_processes, process_id) from ``--coordinator``, ``--num-processes`` and
    ``--process-id``, or None when none is given. Raises UserError (one line) unless all three
    are given, HOST:PORT has a host (an IPv6 one in brackets) and a port in 1..65535, N >= 1 and
    0 <= I < N."""
    given = {"--coordinator": args.coordinator, "--num-processes": args.num_processes,
             "--process-id": args.process_id}
    if all(v is None for v in given.values()):
        return None
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise UserError(f"--coordinator, --num-processes and --process-id go together; missing {', '.join(missing)}")
    host, sep, port = args.coordinator.strip().rpartition(":")
    bare_ipv6 = ":" in host and not (host.startswith("[") and host.endswith("]"))  # "a:1:3" is no host
    if not sep or not host or bare_ipv6 or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(f"--coordinator must be HOST:PORT (an IPv6 host in brackets) with a port in 1..65535, "
                        f"got {args.coordinator!r}")
    n = parse_int(args.num_processes, name="--num-processes", minimum=1)
    i = parse_int(args.process_id, name="--process-id", minimum=0)
    if i >= n:
        raise UserError(f"--process-id must be in 0..{n - 1} with --num-processes {n}, got {i}")
    return f"{host}:{port}", n, i


def _f(v, fmt: str = ".4f") -> str:
    return "n/a" if v is None else format(v, fmt)
