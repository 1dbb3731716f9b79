"""Sweep presets: a depth × width × seed (× corpus) grid over one base RunConfig, as a TOML file.

A preset is data, not code (docs/architecture.md). ``experiments/presets/<name>.toml``::

    name = "cpu"                       # must equal the file stem for a built-in preset
    description = "one paragraph: what it reproduces, at what cost, and why these choices"
    expected_minutes = 45.0            # optional: measured wall time on the stated machine
    notes = "..."                      # optional free text (shown by `depthwidth presets show`)

    [base.model]                       # the base RunConfig, sections as in depthwidth.config;
    n_head = 2                         # it is also what `depthwidth train --preset NAME` trains
    [base.data]
    [base.train]
    [base.mesh]

    [grid]
    depths = [2, 4, 8]                 # model.n_layer values
    seeds = [0, 1]                     # train.seed values
    corpora = ["tinyshakespeare"]      # optional: data.corpus values (default: base.data.corpus)
    lrs = [3e-3, 6e-3]                 # optional: train.lr values (a learning-rate scan)
    [grid.lr_rule]                     # optional: width-aware peak lr for every grid point,
    ref_width = 64                     #   lr = base.train.lr * (ref_width / d_model)^power
    power = 1.0                        #   (power 1: lr ∝ 1/width, the µP rule for Adam's hidden
                                       #   weights, Yang et al. 2021, applied to all parameters)
    [grid.widths]                      # model.d_model values per depth (keys are the depths)
    2 = [32, 64]
    4 = [24, 48]
    8 = [16, 32]
    [grid.overrides.8.train]           # optional: per-depth changes to the base, same sections
    lr = 2e-3
    [grid.scale_steps]                 # optional: steps from a token budget per parameter
    tokens_per_param = 20.0            # steps = round(tokens_per_param * N / (batch_size*seq_len)),
    min_steps = 200                    #   N = 12*L*d^2 (Kaplan et al. 2020), clamped to
    max_steps = 5000                   #   [min_steps, max_steps]; warm-up capped at the steps

    [refine]                           # optional: `depthwidth sweep --refine` (all keys optional;
    pairs = "adjacent"                 #   RefineSpec, depthwidth.pipeline.refine): depth pairs,
    target_ln_width = 0.35             #   the 95% interval of ln N* to reach,
    max_runs = 36                      #   refined runs at most (cells x seeds),
    extend = true                      #   extend the range when a pair does not cross inside it,
    max_N = 1.6e6                      #   ... never above this Kaplan N
    min_N = 1e4                        #   ... or below this,
    bootstrap = 400                    #   bootstrap replicates per round

Every grid point becomes one RunConfig (``model.n_layer``, ``model.d_model``, ``train.seed`` and
``data.corpus`` set from the grid, per-depth overrides and step scaling applied) and is
validated like any config. Runs are ordered corpus, seed, depth, width (, lr): a single worker
finishes a whole one-seed sweep before it starts the second seed, so a partial sweep already
covers the grid.

Raises :class:`~depthwidth.errors.UserError` naming the file for an unknown preset, malformed
TOML, an unknown or missing key, an empty grid, duplicate grid values, a width not divisible by
``n_head``, or any other invalid config value.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthwidth.config import RunConfig, from_dict, load_toml, override
from depthwidth.errors import UserError
from depthwidth.theory.accounting import kaplan_n

PRESET_DIR = Path(__file__).resolve().parent / "presets"
TOP_KEYS = {"name", "description", "expected_minutes", "notes", "base", "grid", "refine"}
GRID_KEYS = {"depths", "widths", "seeds", "corpora", "lrs", "lr_rule", "overrides", "scale_steps"}
LR_RULE_KEYS = {"ref_width", "power"}
SCALE_KEYS = {"tokens_per_param", "min_steps", "max_steps"}
REFINE_KEYS = {"pairs", "target_ln_width", "max_runs", "extend", "max_N", "min_N", "bootstrap"}


@dataclass(frozen=True)
class Preset:
    """A loaded, validated preset.

    name, description, notes: text; path: the TOML file; expected_minutes: measured wall time
    (minutes) or None; base: the base RunConfig; depths, seeds, corpora: the grid axes;
    widths: depth -> widths; lrs: learning rates of a scan, or () when the lr is not an axis;
    runs: every grid point as a RunConfig, in run order (module doc); overrides, scale, lr_rule:
    the grid's per-depth overrides, step scaling and width-aware lr (how :func:`merge_config`
    builds a point off the grid); refine: the [refine] table, or None.
    """

    name: str
    description: str
    path: Path
    base: RunConfig
    depths: tuple[int, ...]
    widths: dict[int, tuple[int, ...]]
    seeds: tuple[int, ...]
    corpora: tuple[str, ...]
    runs: tuple[RunConfig, ...]
    expected_minutes: float | None = None
    notes: str = ""
    lrs: tuple[float, ...] = ()
    overrides: dict[int, dict[str, Any]] = dataclasses.field(default_factory=dict)
    scale: dict[str, Any] | None = None
    lr_rule: dict[str, float] | None = None
    refine: RefineSpec | None = None  # the [refine] table (sweep --refine), or None

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (what ``depthwidth presets show --json`` prints)."""
        return {
            "name": self.name, "description": self.description, "path": str(self.path),
            "expected_minutes": self.expected_minutes, "notes": self.notes,
            "depths": list(self.depths), "widths": {str(k): list(v) for k, v in self.widths.items()},
            "seeds": list(self.seeds), "corpora": list(self.corpora), "n_runs": len(self.runs),
            "base": self.base.to_dict(),
            "runs": [{"run_id": r.run_id(), "corpus": r.data.corpus, "n_layer": r.model.n_layer,
                      "d_model": r.model.d_model, "seed": r.train.seed, "steps": r.train.steps,
                      "kaplan_params": kaplan_n(r.model.n_layer, r.model.d_model)} for r in self.runs],
        }


def available() -> list[str]:
    """Names of the built-in presets (the TOML files shipped in ``experiments/presets``)."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def preset_path(name_or_path: str | Path) -> Path:
    """A built-in preset name -> its file; anything that looks like a path -> that path.

    Raises UserError for a name that is neither a built-in preset nor an existing file.
    """
    s = str(name_or_path)
    p = Path(os.path.expanduser(s))
    if s.endswith(".toml") or "/" in s or p.is_file():
        if not p.is_file():
            raise UserError(f"preset file not found: {p}")
        return p
    builtin = PRESET_DIR / f"{s}.toml"
    if not builtin.is_file():
        raise UserError(f"unknown preset {s!r}; built-in presets: {', '.join(available())} (or pass a .toml path)")
    return builtin


def _int_list(value: Any, what: str, where: str, *, minimum: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise UserError(f"{where}: {what} must be a non-empty list of integers")
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
            raise UserError(f"{where}: {what} must hold integers >= {minimum}, got {v!r}")
    if len(set(value)) != len(value):
        raise UserError(f"{where}: {what} has duplicates: {value}")
    return tuple(value)


def _unknown(d: dict[str, Any], allowed: set[str], what: str, where: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise UserError(f"{where}: unknown key(s) {', '.join(map(repr, extra))} in {what} "
                        f"(allowed: {', '.join(sorted(allowed))})")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _depth_keyed(table: Any, what: str, depths: tuple[int, ...], where: str) -> dict[int, Any]:
    if not isinstance(table, dict):
        raise UserError(f"{where}: {what} must be a table keyed by depth")
    out = {}
    for k, v in table.items():
        try:
            L = int(k)
        except ValueError:
            raise UserError(f"{where}: {what} key {k!r} is not a depth") from None
        if L not in depths:
            raise UserError(f"{where}: {what} has depth {L}, which is not in grid.depths {list(depths)}")
        out[L] = v
    return out


def scaled_steps(tokens_per_param: float, n_layer: int, d_model: int, batch_size: int, seq_len: int,
                 min_steps: int, max_steps: int) -> int:
    """Optimiser steps that train on ``tokens_per_param`` tokens per non-embedding parameter.

    N = 12·L·d² (Kaplan et al. 2020, the N of Levine et al.'s law); tokens per step = B·T;
    steps = round(tokens_per_param·N / (B·T)), clamped to [min_steps, max_steps].
    """
    N = kaplan_n(n_layer, d_model)
    return int(min(max_steps, max(min_steps, round(tokens_per_param * N / (batch_size * seq_len)))))


def _scale(cfg: dict[str, Any], spec: dict[str, Any], where: str) -> dict[str, Any]:
    base_train = RunConfig().train
    B = cfg.get("train", {}).get("batch_size", base_train.batch_size)
    T = cfg.get("model", {}).get("seq_len", RunConfig().model.seq_len)
    steps = scaled_steps(spec["tokens_per_param"], cfg["model"]["n_layer"], cfg["model"]["d_model"], B, T,
                         spec["min_steps"], spec["max_steps"])
    train = dict(cfg.get("train", {}))
    train["steps"] = steps
    train["warmup_steps"] = min(train.get("warmup_steps", base_train.warmup_steps), steps)
    return {**cfg, "train": train}


def _scale_spec(raw: Any, where: str) -> dict[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UserError(f"{where}: grid.scale_steps must be a table")
    _unknown(raw, SCALE_KEYS, "grid.scale_steps", where)
    missing = sorted(SCALE_KEYS - set(raw))
    if missing:
        raise UserError(f"{where}: grid.scale_steps needs {', '.join(missing)}")
    tpp = raw["tokens_per_param"]
    if isinstance(tpp, bool) or not isinstance(tpp, (int, float)) or not (math.isfinite(tpp) and tpp > 0):
        raise UserError(f"{where}: grid.scale_steps.tokens_per_param must be a positive number, got {tpp!r}")
    lo, hi = raw["min_steps"], raw["max_steps"]
    if not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise UserError(f"{where}: grid.scale_steps needs integers 1 <= min_steps <= max_steps, got {lo!r}, {hi!r}")
    return {"tokens_per_param": float(tpp), "min_steps": lo, "max_steps": hi}


def _grid_point(base: RunConfig, overrides: dict[int, dict[str, Any]], scale: dict[str, Any] | None, L: int, d: int,
                seed: int, corpus: str, lr: float | None, where: str,
                lr_rule: dict[str, float] | None = None) -> dict[str, Any]:
    """One grid point's config dict: base, then the depth's overrides, then the grid values
    (and the width-aware lr, applied to the lr the overrides leave)."""
    cfg = _merge(base.to_dict(), overrides.get(L, {}))
    cfg = _merge(cfg, {"model": {"n_layer": L, "d_model": d}, "train": {"seed": seed}, "data": {"corpus": corpus}})
    if lr_rule is not None:
        scaled = cfg["train"]["lr"] * (lr_rule["ref_width"] / d) ** lr_rule["power"]
        cfg = _merge(cfg, {"train": {"lr": float(f"{scaled:.6g}")}})  # 6 s.f.: a readable, stable config
    if lr is not None:
        cfg = _merge(cfg, {"train": {"lr": float(lr)}})
    return _scale(cfg, scale, where) if scale else cfg


def merge_config(preset: Preset, L: int, d: int, seed: int, corpus: str) -> dict[str, Any]:
    """The config dict the preset gives a (depth, width, seed, corpus) point, on or off its grid
    (refinement adds widths between grid points). Not for presets with a learning-rate axis."""
    if preset.lrs:
        raise UserError(f"preset {preset.name}: a learning-rate scan cannot be refined")
    return _grid_point(preset.base, preset.overrides, preset.scale, L, d, seed, corpus, None, f"preset {preset.path}",
                       preset.lr_rule)


def _lr_rule(raw: Any, where: str) -> dict[str, float] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UserError(f"{where}: grid.lr_rule must be a table")
    _unknown(raw, LR_RULE_KEYS, "grid.lr_rule", where)
    out = {"ref_width": raw.get("ref_width"), "power": raw.get("power", 1.0)}
    for k, v in out.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and v > 0):
            raise UserError(f"{where}: grid.lr_rule.{k} must be a positive number, got {v!r}")
    return {k: float(v) for k, v in out.items()}


@dataclass(frozen=True)
class RefineSpec:
    """A preset's ``[refine]`` table (module doc): how ``depthwidth sweep --refine`` adds widths
    (the rounds themselves: :mod:`depthwidth.pipeline.refine`). Units: ln N for
    target_ln_width, parameters (Kaplan N) for max_N / min_N; bootstrap: replicates per round.

    It lives here, with the other preset tables, so that :func:`load_preset` rejects a malformed
    table (one-line UserError) while the refinement, which fits, stays above the fits layer."""

    pairs: str = "adjacent"
    target_ln_width: float = 0.35
    max_runs: int = 36
    extend: bool = True
    max_N: float = 1.6e6
    min_N: float = 1e4
    bootstrap: int = 400

    def __post_init__(self) -> None:
        if self.pairs not in ("adjacent", "doubling"):
            raise UserError(f"refine.pairs must be 'adjacent' or 'doubling', got {self.pairs!r}")
        if not (self.target_ln_width > 0 and self.max_runs >= 0 and self.bootstrap >= 50
                and 0 < self.min_N < self.max_N):
            raise UserError("refine needs target_ln_width > 0, max_runs >= 0, bootstrap >= 50, 0 < min_N < max_N")


def parse_refine(raw: Any, where: str) -> RefineSpec | None:
    """The preset's ``[refine]`` table as a RefineSpec (None when absent); UserError if malformed."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise UserError(f"{where}: refine must be a table")
    unknown = sorted(set(raw) - REFINE_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown refine key(s) {', '.join(unknown)} (known: {', '.join(sorted(REFINE_KEYS))})")
    types = {f.name: f.type for f in dataclasses.fields(RefineSpec)}
    vals = {}
    for k, v in raw.items():
        want = {"str": str, "float": (int, float), "int": int, "bool": bool}[types[k]]
        if isinstance(v, bool) != (types[k] == "bool") or not isinstance(v, want):
            noun = {"str": "a string", "float": "a number", "int": "an integer", "bool": "true or false"}[types[k]]
            raise UserError(f"{where}: refine.{k} must be {noun}, got {v!r}")
        vals[k] = float(v) if types[k] == "float" else v
    try:
        return RefineSpec(**vals)
    except UserError as e:
        raise UserError(f"{where}: [refine]: {e}") from None


def parse_preset(raw: dict[str, Any], path: Path) -> Preset:
    """Validate a parsed preset TOML (``raw``) read from ``path`` and expand its grid."""
    where = f"preset {path}"
    _unknown(raw, TOP_KEYS, "the preset", where)
    for key in ("name", "description", "base", "grid"):
        if key not in raw:
            raise UserError(f"{where}: missing {key!r}")
    name, desc = raw["name"], raw["description"]
    if not (isinstance(name, str) and name.strip() and isinstance(desc, str) and desc.strip()):
        raise UserError(f"{where}: name and description must be non-empty strings")
    if path.resolve().parent == PRESET_DIR and name != path.stem:
        raise UserError(f"{where}: name {name!r} must equal the file name {path.stem!r}")
    minutes = raw.get("expected_minutes")
    if minutes is not None and (isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes <= 0):
        raise UserError(f"{where}: expected_minutes must be a positive number, got {minutes!r}")
    notes = raw.get("notes", "")
    if not isinstance(notes, str):
        raise UserError(f"{where}: notes must be a string")

    base_raw = raw["base"]
    if not isinstance(base_raw, dict):
        raise UserError(f"{where}: base must be a table with model/data/train/mesh sections")
    try:
        base = from_dict(base_raw)
    except UserError as e:
        raise UserError(f"{where}: base: {e}") from None

    grid = raw["grid"]
    if not isinstance(grid, dict):
        raise UserError(f"{where}: grid must be a table")
    _unknown(grid, GRID_KEYS, "grid", where)
    for key in ("depths", "widths", "seeds"):
        if key not in grid:
            raise UserError(f"{where}: grid.{key} is missing")
    depths = _int_list(grid["depths"], "grid.depths", where, minimum=1)
    seeds = _int_list(grid["seeds"], "grid.seeds", where, minimum=0)
    widths_raw = _depth_keyed(grid["widths"], "grid.widths", depths, where)
    widths = {}
    for L in depths:
        if L not in widths_raw:
            raise UserError(f"{where}: grid.widths has no widths for depth {L}")
        widths[L] = _int_list(widths_raw[L], f"grid.widths.{L}", where, minimum=1)
    corpora = grid.get("corpora", [base.data.corpus])
    if not (isinstance(corpora, list) and corpora and all(isinstance(c, str) and c for c in corpora)):
        raise UserError(f"{where}: grid.corpora must be a non-empty list of corpus names or paths")
    if len(set(corpora)) != len(corpora):
        raise UserError(f"{where}: grid.corpora has duplicates: {corpora}")
    overrides = _depth_keyed(grid.get("overrides", {}), "grid.overrides", depths, where)
    for L, o in overrides.items():
        if not isinstance(o, dict):
            raise UserError(f"{where}: grid.overrides.{L} must be a table of config sections")
    scale = _scale_spec(grid.get("scale_steps"), where)
    lrs = grid.get("lrs", [])
    if not (isinstance(lrs, list) and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                          and math.isfinite(x) and x > 0 for x in lrs)):
        raise UserError(f"{where}: grid.lrs must be a list of positive learning rates")
    if len(set(lrs)) != len(lrs):
        raise UserError(f"{where}: grid.lrs has duplicates: {lrs}")
    lr_rule = _lr_rule(grid.get("lr_rule"), where)
    if lr_rule and lrs:
        raise UserError(f"{where}: grid.lrs and grid.lr_rule exclude each other")

    runs = []
    for corpus in corpora:
        for seed in seeds:
            for L in depths:
                for d in widths[L]:
                    for lr in lrs or [None]:
                        cfg = _grid_point(base, overrides, scale, L, d, seed, corpus, lr, where, lr_rule)
                        try:
                            runs.append(from_dict(cfg))
                        except UserError as e:
                            raise UserError(f"{where}: grid point L={L} d={d} seed={seed} corpus={corpus}"
                                            + (f" lr={lr}" if lr is not None else "") + f": {e}") from None
    ids = [r.run_id() for r in runs]
    if len(set(ids)) != len(ids):
        raise UserError(f"{where}: two grid points have the same run id (duplicate grid values?)")
    return Preset(name=name, description=" ".join(desc.split()), path=path, base=base, depths=depths,
                  widths=widths, seeds=seeds, corpora=tuple(corpora), runs=tuple(runs),
                  expected_minutes=float(minutes) if minutes is not None else None, notes=notes.strip(),
                  lrs=tuple(float(x) for x in lrs), overrides=overrides, scale=scale, lr_rule=lr_rule,
                  refine=parse_refine(raw.get("refine"), where))


def load_preset(name_or_path: str | Path) -> Preset:
    """Load and validate a preset by built-in name (``smoke``, ``cpu``, ``levine2020``) or path.

    Raises UserError (one line, naming the file) for any problem; see the module docstring.
    """
    path = preset_path(name_or_path)
    return parse_preset(load_toml(path), path)


def with_overrides(preset: Preset, assignments: list[str]) -> Preset:
    """The preset with ``section.field=value`` overrides applied to every run and to the base
    (e.g. ``train.steps=10`` for a quick try). Overriding a grid axis (n_layer, d_model, seed,
    corpus) is refused: edit the grid instead. Raises UserError on a bad assignment."""
    grid_fields = {"model.n_layer", "model.d_model", "train.seed", "data.corpus"} | ({"train.lr"} if preset.lrs else set())
    for a in assignments:
        if a.split("=", 1)[0].strip() in grid_fields:
            raise UserError(f"--set {a!r} changes a grid axis; edit the preset's grid instead")
    if not assignments:
        return preset
    runs = tuple(override(r, assignments) for r in preset.runs)
    return dataclasses.replace(preset, base=override(preset.base, assignments), runs=runs)
