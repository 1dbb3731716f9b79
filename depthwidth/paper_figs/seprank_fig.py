"""fig5_measured_separation_rank: measured grid-tensor ranks next to the bounds, from the stored table.

Reads the ``table.json`` written by :func:`depthwidth.theory.seprank.write_table` (nothing is
measured here) and draws, per width d_x (H = 1, no residual: the residual rows measured the same
ranks), log₃ of the measured rank against depth, next to the counting bound
log₃ C(3^L + d_x, d_x) and the reconstructed published-form upper bound. Filled markers: the
rank is exact (below the number of distinct templates and unchanged by new ones); open markers:
a lower bound (:func:`depthwidth.theory.seprank.is_lower_bound`). With the
``trained.json`` of :func:`depthwidth.experiments.seprank_train.write_table`, crosses mark the
rank of the same shapes after a short training run on real text (weights rounded to 1/64).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError
from depthwidth.paper_figs.registry import name_of
from depthwidth.paper_figs.style import HEIGHT_IN, WIDTH_IN, figure_style, save
from depthwidth.theory.seprank import is_lower_bound


def load(path: str | Path) -> dict[str, Any]:
    """The stored seprank table; UserError (one line) if missing or malformed."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"cannot read the separation-rank table {path}: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list) or not doc["rows"]:
        raise UserError(f"{path}: not a separation-rank table (expected a non-empty 'rows' list)")
    return doc


def measured_separation_rank(doc: dict[str, Any], n_head: int = 1, trained: dict[str, Any] | None = None
                             ) -> tuple[Any, str]:
    """(figure, caption) of the measured ranks (module docstring) for heads ``n_head``; the
    trained ranks too when ``trained`` (a loaded trained.json) is given."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.lines import Line2D

    rows = [r for r in doc["rows"] if r["n_head"] == n_head and not r["residual"] and r["rank"] > 0]
    widths = sorted({r["d_model"] for r in rows})
    cmap = matplotlib.colormaps["plasma"]
    cols = {d: cmap(0.1 + 0.75 * i / max(1, len(widths) - 1)) for i, d in enumerate(widths)}
    fig, ax = plt.subplots(figsize=(WIDTH_IN, HEIGHT_IN))
    for d in widths:
        rs = sorted((r for r in rows if r["d_model"] == d), key=lambda r: r["n_layer"])
        Ls = [r["n_layer"] for r in rs]
        ax.plot(Ls, [r["log3_rank"] for r in rs], color=cols[d], lw=1.6)
        for r in rs:
            ax.plot(r["n_layer"], r["log3_rank"], "o", ms=6, color=cols[d],
                    mfc="white" if is_lower_bound(r) else cols[d])
        ax.plot(Ls, [r["log3_counting_bound"] for r in rs], color=cols[d], ls="--", lw=1.0)
        up = [(r["n_layer"], r["log3_sep_upper"]) for r in rs if r.get("log3_sep_upper") is not None]
        if up:
            ax.plot(*zip(*up), color=cols[d], ls=":", lw=1.2)
    trows = [r for r in (trained or {}).get("rows", []) if r["n_head"] == n_head and not r["residual"]
             and r["d_model"] in cols and r["log3_rank_trained"]]
    for r in trows:
        ax.plot(r["n_layer"], r["log3_rank_trained"], "x", ms=8, mew=1.6, color=cols[r["d_model"]])
    ax.set_yscale("log")
    ax.set_xlabel("depth L (layers)")
    ax.set_ylabel("log₃ rank")
    ax.set_xticks(sorted({r["n_layer"] for r in rows}))
    ax.set_title(f"Measured grid-tensor rank, H = {n_head}, {doc.get('n_positions', 2)} positions",
                 fontsize=10)
    handles = [Line2D([], [], color=cols[d], lw=2, label=f"d_x = {d}") for d in widths]
    handles += [Line2D([], [], color="k", marker="o", lw=1.6, label="measured (filled: exact)"),
                Line2D([], [], color="k", marker="o", mfc="white", lw=0, label="lower bound (templates capped it)"),
                Line2D([], [], color="k", ls="--", lw=1.0, label="counting bound C(3^L + d_x, d_x)"),
                Line2D([], [], color="k", ls=":", lw=1.2, label="published-form upper bound (reconstructed)")]
    if trows:
        handles.append(Line2D([], [], color="k", marker="x", lw=0, mew=1.6,
                              label=f"trained {trained.get('steps', '?')} steps on {trained.get('corpus', '?')} (1/64 grid)"))
    ax.legend(handles=handles, fontsize=7, loc="upper left")
    fig.tight_layout()
    caption = ("Grid-tensor rank of the analysed self-attention network (softmax, LayerNorm and "
               f"feed-forward removed; random integer weights; H = {n_head}) against depth, next to the counting "
               "bound and the reconstructed published-form upper bound. Open markers are lower bounds."
               + (" Crosses: the same shapes after a short training run on real text." if trows else ""))
    return fig, caption


def draw(table_path: str | Path, out_dir: str | Path, trained_path: str | Path | None = None) -> list[str]:
    """Draw the figure from ``table_path`` (and ``trained_path``, if given) into ``out_dir``
    (PNG + PDF); returns the paths. UserError if a table is missing or malformed."""
    doc = load(table_path)
    trained = load(trained_path) if trained_path else None
    with figure_style():
        fig, _ = measured_separation_rank(doc, trained=trained)
        return [str(p) for p in save(fig, out_dir, name_of(measured_separation_rank))]
