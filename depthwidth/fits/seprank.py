"""What the stored separation-rank tables say, in a few numbers (the analysis step of the
``seprank`` experiment kind; :mod:`depthwidth.pipeline.registry`).

Reads the documents written by :func:`depthwidth.theory.seprank.write_table` (``table.json``:
random integer weights) and :func:`depthwidth.experiments.seprank_train.write_table`
(``trained.json``: a short training run on text), already loaded; measures nothing. Ranks are
counts (the rank of the grid tensor's matricisation; docs/results/seprank.md), log₃ ranks are
compared with the counting bound log₃ C(3^L + d_x, d_x) of Levine et al. 2020 (arXiv 2006.12467).
"""

from __future__ import annotations

from collections import Counter
from typing import Any


def _shape(r: dict[str, Any]) -> tuple[int, int, int]:
    return r["n_layer"], r["d_model"], r["n_head"]


def summarise(table: dict[str, Any], trained: dict[str, Any] | None = None) -> dict[str, Any]:
    """The tables' headline numbers: {"rows", "exact" (rows whose rank is not a lower bound),
    "lower_bounds", "within_counting_bound" (every row's rank at most the counting bound),
    "residual_changes_rank" (the (L, d_x, H) whose residual row measured another rank),
    "max_rank" (the largest measured rank, its shape and whether it is a lower bound), "trained": None or {"rows",
    "within_counting_bound", "stable_across_grids", "vs_init" and "vs_random" (verdict counts:
    higher / equal / lower)}}. Raises KeyError for a row without the fields the writers store."""
    rows = table["rows"]
    plain = {_shape(r): r["rank"] for r in rows if not r["residual"]}
    changed = sorted(_shape(r) for r in rows if r["residual"] and _shape(r) in plain and plain[_shape(r)] != r["rank"])
    top = max(rows, key=lambda r: r["rank"])
    out: dict[str, Any] = {
        "rows": len(rows), "exact": sum(not r["lower_bound"] for r in rows),
        "lower_bounds": sum(bool(r["lower_bound"]) for r in rows),
        "within_counting_bound": all(r["within_counting_bound"] for r in rows),
        "residual_changes_rank": [list(s) for s in changed],
        "max_rank": {"rank": top["rank"], "n_layer": top["n_layer"], "d_model": top["d_model"],
                     "n_head": top["n_head"], "residual": top["residual"],
                     "lower_bound": bool(top["lower_bound"])},
        "trained": None,
    }
    if trained is not None:
        t = trained["rows"]
        out["trained"] = {"rows": len(t), "within_counting_bound": all(r["within_counting_bound"] for r in t),
                          "stable_across_grids": all(r["stable_across_grids"] for r in t),
                          "vs_init": dict(sorted(Counter(r["trained_vs_init"] for r in t).items())),
                          "vs_random": dict(sorted(Counter(r["trained_vs_random"] for r in t).items()))}
    return out


def summary_text(s: dict[str, Any]) -> str:
    """:func:`summarise`'s result as a few lines."""
    m = s["max_rank"]
    lines = [f"random weights: {s['rows']} rows, {s['exact']} exact, {s['lower_bounds']} lower bound(s); every rank "
             f"{'within' if s['within_counting_bound'] else 'NOT within'} the counting bound; largest rank {m['rank']} "
             f"(L={m['n_layer']} d_x={m['d_model']} H={m['n_head']}{' residual' if m['residual'] else ''}"
             f"{', a lower bound' if m['lower_bound'] else ''}); "
             + ("residual connections change no rank" if not s["residual_changes_rank"] else
                f"residual connections change the rank at (L, d_x, H) {s['residual_changes_rank']}")]
    t = s["trained"]
    if t is not None:
        lines.append(f"trained weights: {t['rows']} rows; trained vs step 0 {t['vs_init']}, vs random {t['vs_random']}; "
                     f"{'stable' if t['stable_across_grids'] else 'NOT stable'} across rounding grids; "
                     f"{'within' if t['within_counting_bound'] else 'NOT within'} the counting bound")
    return "\n".join(lines)
