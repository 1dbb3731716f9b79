"""Results table: run records -> one row per run and one row per (depth, width) cell.

Reads ``RESULTS/runs/*/record.json`` with :func:`depthwidth.records.iter_records` (format
documented there). Only records of kind "train" are rows of the table; records of other
experiment kinds in the same directory are set aside (``other_kinds``), never averaged in. A
run is *used* when :func:`depthwidth.records.train_record_problem` finds nothing wrong with it
(finished; typed counts; finite losses in (0, 2 ln V]; test_loss_chunks that average to
test_loss); diverged runs, impossible records and run directories with no record.json
(unfinished or crashed) are listed with a reason and never averaged in.

Cells are keyed by (n_layer, d_model). All seeds in a cell must share the rest of their
configuration (the RunConfig identity, :meth:`depthwidth.config.RunConfig.identity`, minus
train.seed): averaging runs trained differently would be silently wrong, so a mixed cell raises
UserError. Different cells may differ only in what a preset derives from the shape (the lr from
the width, the steps from the size: :data:`PER_SHAPE`); records of two protocols raise UserError
even when no cell has both (:func:`check_one_protocol`), and steps that differ between cells are
named in the fit's warnings.

With ``tune_lr`` (other results directories of the same protocol at other learning rates), a
cell holds the runs of one lr only: the lr whose runs have the lowest mean *validation* loss,
among the lrs trained with the cell's largest set of seeds (the test loss, which the fit uses,
plays no part in the choice, so the choice does not select on the test set): a per-shape tuned
lr out of a finite grid. A cell trained at one lr only keeps it. The choice is made once, from all seeds: the bootstrap
resamples losses at the chosen lr and does not re-choose it.

N in the table is ``params["kaplan"]`` = 12·L·d² (Kaplan et al. 2020), the N of Levine et al.'s
fit; the exact non-embedding count ``params["non_embedding"]`` is carried alongside.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from depthwidth import storage
from depthwidth.config import from_dict
from depthwidth.errors import UserError
from depthwidth.records import TRAIN, iter_records, kind_of, train_record_problem
from depthwidth.theory.accounting import kaplan_n

RUN_COLUMNS = ["run_id", "n_layer", "d_model", "n_head", "seed", "status", "test_loss",
               "N", "N_exact", "N_embedding", "tokens", "steps", "context", "chunks"]
CELL_COLUMNS = ["n_layer", "d_model", "N", "N_exact", "ln_N", "n_seeds", "mean", "std", "sem",
                "min", "max", "seeds"]


@dataclass
class ResultsTable:
    """runs: every record (DataFrame, RUN_COLUMNS); cells: per (n_layer, d_model) statistics over
    used runs (CELL_COLUMNS: mean/std/sem of test_loss in nats/token, std with ddof=1 and NaN
    for one seed, sem = std/sqrt(n)); excluded: records not used, with ``reason``; unfinished:
    run ids whose directory has no record.json; losses: per cell, the used seeds' test losses
    as a float list (what the bootstrap resamples), in the order of the cell's ``seeds``;
    chunks: per cell, the used seeds' ``test_loss_chunks`` (a list per seed, same order), or None
    when any of its records lacks them (records made before they existed); other_kinds: run id ->
    kind of the records that are not training runs (not in the table)."""

    results: str
    runs: pd.DataFrame
    cells: pd.DataFrame
    excluded: pd.DataFrame
    unfinished: list[str]
    losses: dict[tuple[int, int], list[float]]
    chunks: dict[tuple[int, int], list[list[float]] | None] | None = None
    other_kinds: dict[str, str] = field(default_factory=dict)
    cells_of: str | None = None  # the results directory whose cells this table was restricted to
    seeds: list[int] | None = None  # the seeds this table was restricted to (None: all)
    lr_tuned: dict[str, Any] | None = None  # with tune_lr: the directories and each cell's lr choice
    also: list[str] = field(default_factory=list)  # further directories whose records joined the table
    reruns: list[dict[str, Any]] = field(default_factory=list)  # with reruns="first": the runs read twice
    warnings: list[str] = field(default_factory=list)  # what the fit must say about its records (protocols)

    def depths(self) -> list[int]:
        return sorted(int(x) for x in self.cells["n_layer"].unique())

    def summary(self) -> dict[str, Any]:
        """JSON-ready summary (the ``table`` object of the fit file)."""
        return {
            "results": self.results,
            "n_records": int(len(self.runs)),
            "n_used": int(len(self.runs) - len(self.excluded)),
            "n_cells": int(len(self.cells)),
            "excluded": [
                {k: _plain(r[k]) for k in ("run_id", "n_layer", "d_model", "seed", "status", "reason")}
                for r in self.excluded.to_dict("records")
            ],
            "unfinished": list(self.unfinished),
            **({"cells_of": self.cells_of} if self.cells_of else {}),
            **({"seeds": list(self.seeds)} if self.seeds is not None else {}),
            **({"lr_tuned": self.lr_tuned} if self.lr_tuned is not None else {}),
            **({"also": list(self.also)} if self.also else {}),
            **({"reruns": list(self.reruns)} if self.reruns else {}),
        }


def _plain(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _context(config: Any, source: str) -> str:
    """The run's identity (the one rule, RunConfig.identity) minus the seed, as canonical JSON:
    what the seeds of one cell must share. Raises UserError naming ``source`` for a bad config."""
    if not isinstance(config, dict):
        return "null"
    try:
        identity = from_dict(config).identity()
    except (UserError, TypeError) as e:
        raise UserError(f"{source}: config is not a valid run config: {e}") from None
    identity["train"].pop("seed")
    return json.dumps(identity, sort_keys=True, separators=(",", ":"))


def _run_row(rec: dict[str, Any], source: str) -> dict[str, Any]:
    """One row of ``runs``; ``reason`` (:func:`depthwidth.records.train_record_problem`) says why
    the record is not used, None when it is. An excluded record's fields are shown, not trusted."""
    reason = train_record_problem(rec)
    params = rec["params"] if isinstance(rec["params"], dict) else {}
    L, d = rec["n_layer"], rec["d_model"]
    N = math.nan
    if reason is None:
        # The record's own count is authoritative; 12·L·d² is its definition when it is absent.
        N = float(params["kaplan"] if "kaplan" in params else kaplan_n(L, d))
    return {
        "run_id": rec["run_id"], "n_layer": L, "d_model": d, "n_head": rec["n_head"],
        "seed": rec["seed"], "status": rec["status"], "test_loss": rec["test_loss"],
        "N": N, "N_exact": params.get("non_embedding"), "N_embedding": params.get("embedding"),
        "tokens": rec["tokens"], "steps": rec.get("steps"),
        "context": _context(rec.get("config"), source) if reason is None else None,
        "chunks": rec.get("test_loss_chunks"), "reason": reason,
    }


# What the cells of one fit may differ in: the shape, the seed, and what a preset derives from
# the shape (grid.lr_rule: the lr from the width; grid.scale_steps: the steps and warm-up).
PER_SHAPE = (("model", "n_layer"), ("model", "d_model"), ("train", "seed"), ("train", "lr"),
             ("train", "steps"), ("train", "warmup_steps"))


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = json.dumps(v, sort_keys=True)
    return out


def _protocol(context: str) -> str:
    ident = json.loads(context)
    if not isinstance(ident, dict):
        return context
    for sec, k in PER_SHAPE:
        ident.get(sec, {}).pop(k, None)
    return json.dumps(ident, sort_keys=True)


# The protocol fields a reader looks for first in a mix of protocols, named before the rest (steps
# and lr are PER_SHAPE, so never among them: the message gives the steps of each group instead).
LEADING_KEYS = ("train.batch_size", "model.seq_len", "data.corpus", "data.tokenizer", "data.heldout")


def check_one_protocol(used: pd.DataFrame, results: str, lr_rule: bool = True) -> list[str]:
    """Every record of a fit must come from one training protocol, not only the seeds of a
    cell: UserError (naming the fields that differ and a run of each protocol) when the used
    runs differ in anything but :data:`PER_SHAPE`. Steps that differ between cells, and lrs
    that differ at one width, are legitimate in a preset that scales them (grid.scale_steps),
    but also what mixing two sweeps looks like: returned as warnings that name them; so are lrs
    that follow no one width rule (:func:`_lr_rule_warning`; not with ``lr_rule`` False, for lrs
    chosen per cell by --tune-lr)."""
    protocols = used["context"].map(_protocol)
    if protocols.nunique() > 1:
        groups = sorted(used.groupby(protocols, sort=False), key=lambda pg: (-len(pg[1]), sorted(pg[1]["run_id"])[0]))
        flats = [_flat(json.loads(p)) if p != "null" else {"config": "null"} for p, _ in groups]
        keys = sorted({k for f in flats for k in f if len({g.get(k) for g in flats}) > 1},
                      key=lambda k: (LEADING_KEYS.index(k) if k in LEADING_KEYS else len(LEADING_KEYS), k))
        # steps may differ per shape (PER_SHAPE), so they are not in the protocol; but a mix of a
        # 2,000- and an 8,000-step sweep is told by its steps first, so they are named when they differ
        steps = [sorted({int(v) for v in g["steps"].dropna()}) for _, g in groups]
        show_steps = len({tuple(v) for v in steps}) > 1
        runs = "; ".join(f"{len(g)} like {sorted(g['run_id'])[0]}"
                         + (f" ({'/'.join(map(str, st))} steps)" if show_steps else "")
                         for (_, g), st in zip(groups, steps))
        raise UserError(f"the records of {results} mix {len(groups)} training protocols (they differ in "
                        f"{', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}): {runs}; "
                        "fit one protocol at a time")
    warnings = []
    steps = used.groupby("steps", dropna=False)
    if len(steps) > 1:
        warnings.append("the runs were trained for different numbers of steps: " + ", ".join(
            f"{s} ({g[['n_layer', 'd_model']].drop_duplicates().shape[0]} cells, e.g. {sorted(g['run_id'])[0]})"
            for s, g in steps) + "; right only for a preset that scales steps with size (grid.scale_steps)")
    lr_warning = _lr_rule_warning(used) if lr_rule else None
    if lr_warning:
        warnings.append(lr_warning)
    return warnings


# Relative tolerance of an lr rule's fit: presets store a rule's lr to 6 significant figures.
LR_RULE_RTOL = 1e-5


def _lr_rule_warning(used: pd.DataFrame) -> str | None:
    """A warning when the cells' learning rates follow no single width rule: one sweep's lrs are
    lr = c_L·d_model^(−p) (grid.lr_rule with one power p; c_L may differ by depth, through
    per-depth overrides), so ln lr = ln c_L − p·ln d_model fits them to rounding. Residuals
    beyond :data:`LR_RULE_RTOL` are what two sweeps of different lr rules
    mixed at different cells look like (least squares in numpy; None when the lrs fit). Two lrs
    in one cell never get here: the cell check refuses them (the lr is in the run's identity)."""
    lr = used["context"].map(lambda c: (json.loads(c) or {}).get("train", {}).get("lr") if c != "null" else None)
    cells = pd.DataFrame({"L": used["n_layer"], "d": used["d_model"], "lr": lr}).dropna().drop_duplicates()
    if cells.empty:
        return None
    depths = sorted(cells["L"].unique())
    X = np.column_stack([(cells["L"] == L).to_numpy(float) for L in depths] + [np.log(cells["d"].to_numpy(float))])
    y = np.log(cells["lr"].to_numpy(float))
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    resid = np.abs(X @ coef - y)
    worst = int(np.argmax(resid))
    if resid[worst] <= LR_RULE_RTOL:
        return None
    row, off = cells.iloc[worst], math.exp(resid[worst])
    return (f"the learning rates follow no single width rule lr = c_L * d_model^-p (L{int(row.L)} d{int(row.d)} "
            f"lr {row.lr:g} is {off:.3g}x off the best one, p = {-coef[-1]:.3g}): records of sweeps with "
            "different lr rules mixed at different cells?")


def _more_records(d: str, flag: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of a further results directory (``flag``: --tune-lr or --also) and the paths
    of its run directories without a record. UserError when it holds no training record: a typo
    must not pass as a directory read."""
    more = iter_records(d)
    if not any(kind_of(r) == TRAIN for r in more):
        raise UserError(f"{flag} directory {d} holds no training records")
    ids = {r["run_id"] for r in more}
    return more, [f"{d}/{storage.RUNS}/{r}" for r in storage.open_results(d).run_ids() if r not in ids]


RERUNS = ("refuse", "first")


def _cpu(rec: dict[str, Any]) -> str | None:
    host = rec.get("host")
    return host.get("cpu_model") if isinstance(host, dict) else None


def _rerun_row(kept: dict[str, Any], kept_dir: str, other: dict[str, Any], other_dir: str) -> dict[str, Any]:
    """One run id recorded in two directories: the same configuration and seed trained twice (e.g.
    on two machines). What the table keeps and what the second training measured beside it."""
    def loss(r: dict[str, Any]) -> float | None:
        v = r.get("test_loss")
        return float(v) if isinstance(v, (int, float)) else None

    return {"run_id": kept["run_id"], "n_layer": kept.get("n_layer"), "d_model": kept.get("d_model"),
            "seed": kept.get("seed"), "kept": kept_dir, "other": other_dir,
            "test_loss_kept": loss(kept), "test_loss_other": loss(other),
            "cpu_kept": _cpu(kept), "cpu_other": _cpu(other)}


def _no_run_twice(every: list[dict[str, Any]], more: list[dict[str, Any]], d: str, dir_of: dict[int, str],
                  reruns: str = "refuse") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The records of directory ``d`` that may join ``every``, and the reruns set aside.

    A run id already among ``every`` would count twice: ``reruns="refuse"`` raises UserError;
    ``reruns="first"`` keeps the record read first (``every``'s) and returns the pair as a rerun
    (:func:`_rerun_row`), so the table stays one record per run and the second training is kept
    as a measurement of rerun noise."""
    first = {r["run_id"]: r for r in every}
    twice = sorted(r["run_id"] for r in more if r["run_id"] in first)
    if twice and reruns != "first":
        raise UserError(f"run {twice[0]} is in both {dir_of[id(first[twice[0]])]} and {d} ({len(twice)} run(s) "
                        "twice); read each directory once, or keep the first with --reruns first")
    rows = [_rerun_row(first[r["run_id"]], dir_of[id(first[r["run_id"]])], r, d)
            for r in sorted(more, key=lambda r: r["run_id"]) if r["run_id"] in first]
    return [r for r in more if r["run_id"] not in first], rows


def _only_seeds(every: list[dict[str, Any]], seeds: list[int], dirs: list[str]) -> list[dict[str, Any]]:
    """The records of ``every`` that are not training runs or are runs of ``seeds``. UserError
    when a seed has no training record in ``dirs``: a typo, or a seed not trained yet, must never
    give a silently smaller table."""
    present = {r.get("seed") for r in every if kind_of(r) == TRAIN}
    absent = [s for s in seeds if s not in present]
    if absent:
        raise UserError(f"no training records of seed {', '.join(map(str, absent))} in {', '.join(dirs)} "
                        f"(seeds there: {', '.join(map(str, sorted(x for x in present if x is not None))) or 'none'})")
    return [r for r in every if kind_of(r) != TRAIN or r.get("seed") in seeds]


def _cells(used: pd.DataFrame) -> tuple[pd.DataFrame, dict[tuple[int, int], list[float]],
                                        dict[tuple[int, int], list[list[float]] | None]]:
    """Per (n_layer, d_model) cell of the used runs: its row (CELL_COLUMNS), its seeds' test
    losses and test-chunk losses (ResultsTable). UserError when a cell mixes configurations
    beyond the seed or holds one seed twice."""
    cells_rows = []
    losses: dict[tuple[int, int], list[float]] = {}
    chunks: dict[tuple[int, int], list[list[float]] | None] = {}
    for (L, d), g in used.groupby(["n_layer", "d_model"], sort=True):
        g = g.sort_values("seed")
        if g["context"].nunique() > 1:
            raise UserError(f"cell L={L} d={d} mixes runs with different configurations besides the seed "
                            f"({', '.join(g['run_id'])}); split the results directory")
        if g["run_id"].duplicated().any():  # one config in two folders: the id alone would be named twice
            raise UserError(f"run {g.loc[g['run_id'].duplicated(), 'run_id'].iloc[0]} is recorded more than once "
                            f"(a run folder copied under another name?); keep one")
        if g["seed"].duplicated().any():
            raise UserError(f"cell L={L} d={d} has several records with the same seed ({', '.join(g['run_id'])})")
        y = g["test_loss"].to_numpy()
        n = len(y)
        std = float(y.std(ddof=1)) if n > 1 else math.nan
        losses[(int(L), int(d))] = [float(v) for v in y]
        ch = list(g["chunks"])
        ok = all(isinstance(c, list) and c and len(c) == len(ch[0]) for c in ch)
        chunks[(int(L), int(d))] = [[float(v) for v in c] for c in ch] if ok else None
        cells_rows.append({
            "n_layer": int(L), "d_model": int(d), "N": float(g["N"].iloc[0]),
            "N_exact": _plain(g["N_exact"].iloc[0]), "ln_N": math.log(float(g["N"].iloc[0])),
            "n_seeds": n, "mean": float(y.mean()), "std": std,
            "sem": std / math.sqrt(n) if n > 1 else math.nan,
            "min": float(y.min()), "max": float(y.max()), "seeds": sorted(int(s) for s in g["seed"]),
        })
    return pd.DataFrame(cells_rows, columns=CELL_COLUMNS), losses, chunks


def load_table(results: str | Path, cells_of: str | Path | None = None,
               seeds: Iterable[int] | None = None,
               tune_lr: Iterable[str | Path] | None = None,
               also: Iterable[str | Path] | None = None, reruns: str = "refuse") -> ResultsTable:
    """Load every record under ``results`` into a :class:`ResultsTable`.

    ``cells_of``: another results directory; only the (n_layer, d_model) cells that have a usable
    run there are kept (e.g. the same grid at two training lengths, compared on matched cells).
    ``seeds``: only the training records of these seeds are loaded (e.g. to compare a sweep that
    has one seed so far with the same seed of another); the others are not in the table at all.

    ``tune_lr``: other results directories, read with ``results``; per cell, the runs of the lr
    with the lowest mean validation loss are used (module docstring; ``lr_tuned`` says which).

    ``also``: further results directories of the *same* protocol whose records join the table as
    if they were under ``results`` (e.g. extra seeds trained into a directory of their own, so the
    fit made from ``results`` alone stays as it was). A cell then holds the seeds of every
    directory; the protocol and cell checks below apply to all of them together.
    ``reruns``: what a run id found in two of these directories means (the same configuration and
    seed trained twice): "refuse" (UserError) or "first" (the record of the directory named first
    is used, the other is listed in ``reruns`` with both test losses and CPU models).

    Raises UserError if the directory is missing, a record is malformed, a cell mixes runs whose
    configurations differ beyond the seed, the used runs come from two training protocols
    (:func:`check_one_protocol`), or no run is usable; with ``tune_lr``, also if the
    directories' runs differ beyond shape, lr and seed, or one run (shape, seed, lr) is in two;
    with ``also``, if a directory holds no training record, one run id is in two directories (it
    would count twice), or ``tune_lr`` is given too.
    """
    tune_dirs = [str(d) for d in tune_lr] if tune_lr is not None else None
    also_dirs = [str(d) for d in also] if also is not None else []
    if reruns not in RERUNS:
        raise UserError(f"--reruns must be one of {', '.join(RERUNS)}, got {reruns!r}")
    rerun_rows: list[dict[str, Any]] = []
    if also_dirs and tune_dirs:
        raise UserError("--also and --tune-lr cannot be combined: choose the lrs in one fit, add seeds in another")
    every = iter_records(results)
    recorded = {r["run_id"] for r in every}
    dir_of = {id(r): str(results) for r in every}  # with tune_lr: which directory a record came from
    extra_unfinished: list[str] = []
    for d, flag in [*((d, "--tune-lr") for d in tune_dirs or []), *((d, "--also") for d in also_dirs)]:
        more, unfinished_there = _more_records(d, flag)
        if flag == "--also":  # more seeds of one lr: a run read twice would count twice (tune_lr checks its own)
            more, twice = _no_run_twice(every, more, d, dir_of, reruns)
            rerun_rows += twice
        extra_unfinished += unfinished_there
        dir_of.update({id(r): d for r in more})
        every = every + more
    if cells_of is not None:
        other = load_table(cells_of).cells
        keep = {(int(L), int(d)) for L, d in zip(other["n_layer"], other["d_model"])}
        every = [r for r in every if kind_of(r) != TRAIN or (r.get("n_layer"), r.get("d_model")) in keep]
    if seeds is not None:
        seeds = sorted({int(s) for s in seeds})
        every = _only_seeds(every, seeds, [str(results), *(tune_dirs or []), *also_dirs])
    records = [r for r in every if kind_of(r) == TRAIN]
    lr_tuned = None
    if tune_dirs:
        n_read = len(records)
        records, choices = _tune_lr([(dir_of[id(r)], r) for r in records], [str(results), *tune_dirs])
        # n_records counts the runs at the chosen lrs; these say how many were read and set aside
        lr_tuned = {"dirs": tune_dirs, "selected_by": "val_loss", "n_read": n_read,
                    "n_other_lrs": n_read - len(records), "cells": choices}
    rows = [_run_row(r, r["run_id"]) for r in records]
    unfinished = [r for r in storage.open_results(results).run_ids() if r not in recorded]
    unfinished += extra_unfinished
    runs = pd.DataFrame(rows, columns=[*RUN_COLUMNS, "reason"])
    used_mask = runs["reason"].isna()
    excluded = runs.loc[~used_mask].reset_index(drop=True)
    used = runs.loc[used_mask].copy()
    if used.empty:
        raise UserError(f"no usable runs in {results}: {len(records)} record(s), "
                        f"{len(excluded)} excluded, {len(unfinished)} unfinished")
    used["test_loss"] = used["test_loss"].astype(float)
    where = str(results) + "".join(f" and {d}" for d in also_dirs)  # --also: a mix may come from either
    warnings = check_one_protocol(used, where, lr_rule=not tune_dirs)

    cells, losses, chunks = _cells(used)
    return ResultsTable(results=str(results), runs=runs, cells=cells, excluded=excluded,
                        unfinished=unfinished, losses=losses, chunks=chunks,
                        other_kinds={r["run_id"]: kind_of(r) for r in every if kind_of(r) != TRAIN},
                        cells_of=str(cells_of) if cells_of is not None else None, seeds=seeds,
                        lr_tuned=lr_tuned, warnings=warnings, also=also_dirs, reruns=rerun_rows)


# What the runs of one lr scan or lr choice may differ in: the shape, the lr and the seed.
LR_SCAN_FREE = (("model", "n_layer"), ("model", "d_model"), ("train", "lr"), ("train", "seed"))


def check_one_lr_protocol(sourced: list[tuple[str, dict[str, Any]]], dirs: list[str]) -> None:
    """For records read from several directories as one lr scan (``sourced``: (directory,
    record) pairs): UserError if a (depth, width, seed, lr) run comes twice (it would count
    twice) or if the runs differ in anything but :data:`LR_SCAN_FREE` (it would compare
    protocols, not lrs)."""
    protocols: set[str] = set()
    seen: dict[tuple[int, int, int, float], str] = {}
    for d, r in sourced:
        source = f"{d}/runs/{r.get('run_id')}"
        cfg = r.get("config")
        if not isinstance(cfg, dict):
            raise UserError(f"{source}: a record without a config cannot be placed in an lr scan")
        try:
            ident = from_dict(cfg).identity()
        except (UserError, TypeError, AttributeError) as e:
            raise UserError(f"{source}: config is not a valid run config: {e}") from None
        key = (r["n_layer"], r["d_model"], r["seed"], float(ident["train"]["lr"]))
        if key in seen:
            raise UserError(f"L={key[0]} d={key[1]} seed={key[2]} lr={key[3]:g} is in both {seen[key]} and {d} "
                            "(it has two records); read one of them")
        seen[key] = str(d)
        for sec, k in LR_SCAN_FREE:
            ident[sec].pop(k, None)
        protocols.add(json.dumps(ident, sort_keys=True))
    if len(protocols) > 1:
        raise UserError(f"the runs of {', '.join(map(str, dirs))} differ beyond (n_layer, d_model, lr, seed) in "
                        f"{len(protocols)} ways: an lr scan or lr choice needs one training protocol")


def _val_score(rec: dict[str, Any]) -> float:
    """A run's validation loss for the lr choice; inf when it did not finish with a finite one
    (a diverged lr loses to any lr that trained)."""
    v = rec.get("val_loss")
    ok = rec.get("status") == "finished" and isinstance(v, (int, float)) and not isinstance(v, bool)
    return float(v) if ok and math.isfinite(v) else math.inf


def _tune_lr(sourced: list[tuple[str, dict[str, Any]]], dirs: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per (n_layer, d_model) cell, keep the records of the lr with the lowest mean validation
    loss among the lrs trained with the cell's largest seed set (an lr with fewer seeds is left
    out: a mean over other seeds would compare seeds, not lrs); ties go to the lower lr.
    ``sourced``: (directory, record) pairs, checked by :func:`check_one_lr_protocol`. Returns
    the kept records and, per cell, the choice (JSON-ready)."""
    check_one_lr_protocol(sourced, dirs)
    by_cell: dict[tuple[int, int], dict[float, list[dict[str, Any]]]] = {}
    for _, r in sourced:
        lr = float(r["config"]["train"]["lr"])
        by_cell.setdefault((r["n_layer"], r["d_model"]), {}).setdefault(lr, []).append(r)
    kept: list[dict[str, Any]] = []
    choices: list[dict[str, Any]] = []
    for (L, d), by_lr in sorted(by_cell.items()):
        seeds = {lr: frozenset(r["seed"] for r in rs) for lr, rs in by_lr.items()}
        most = max(seeds.values(), key=lambda x: (len(x), sorted(x)))
        score = {lr: float(np.mean([_val_score(r) for r in rs])) for lr, rs in sorted(by_lr.items())
                 if seeds[lr] == most}
        best = min(score, key=lambda lr: (score[lr], lr))
        kept += by_lr[best]
        choices.append({"n_layer": int(L), "d_model": int(d), "lr": best,
                        "val_loss_by_lr": {f"{lr:g}": (v if math.isfinite(v) else None) for lr, v in score.items()},
                        "seeds_compared": sorted(int(x) for x in most),
                        "lrs_left_out": [lr for lr in sorted(by_lr) if seeds[lr] != most]})
    return kept, choices
