"""The one fixed figure style: rcParams, colours, sizes, and deterministic saving.

Every figure is drawn inside :func:`figure_style` (a ``matplotlib.rc_context``) so the style
never leaks into the caller's matplotlib state, and saved by :func:`save` as PNG (150 dpi) and
PDF with the timestamps stripped, so regenerating a committed figure from the same records
gives the same bytes: the PNG everywhere, the PDF with the plotting stack of ``uv.lock``. A
PDF embeds a subset of DejaVu Sans (TrueType, ``pdf.fonttype`` 42, which journals accept and
Type 3 is not) that fontTools cuts, and its bytes change with fontTools' version; so the PDF
names the matplotlib and fontTools that drew it in its ``Producer`` (docs/guide/figures.md).
"""

from __future__ import annotations

import importlib.metadata
import io
from contextlib import contextmanager
from pathlib import Path

from depthwidth import storage

WIDTH_IN = 6.8  # one journal column and a half; every figure shares it
HEIGHT_IN = 4.6
PNG_DPI = 150

RC = {
    "figure.figsize": (WIDTH_IN, HEIGHT_IN),
    "figure.dpi": 100,
    "savefig.dpi": PNG_DPI,
    "savefig.bbox": "tight",
    "savefig.pad_inches": 0.05,
    "font.family": "DejaVu Sans",  # bundled with matplotlib: same glyphs on every machine
    "font.size": 9.5,
    "axes.titlesize": 10.5,
    "axes.labelsize": 10,
    "legend.fontsize": 8,
    "legend.framealpha": 0.9,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "axes.grid": True,
    "grid.alpha": 0.25,
    "grid.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "lines.linewidth": 1.6,
    "lines.markersize": 5,
    "errorbar.capsize": 2.5,
    "pdf.fonttype": 42,  # embed TrueType, so text in the PDF stays text
    "svg.hashsalt": "depthwidth",
}

# Okabe & Ito (2008) colour-blind-safe palette, for the named lines every figure shares.
COLORS = {
    "levine2020": "#D55E00",  # vermillion: the published law
    "fit": "#0072B2",  # blue: this project's fit
    "theory": "#009E73",  # green: the theoretical threshold
    "transition": "#555555",
    "neutral": "#333333",
}
DEPTH_CMAP = "viridis"


def depth_colors(depths: list[int]) -> dict[int, tuple]:
    """A colour per depth, shallow = light to deep = dark (viridis from 0.85 down to 0.05), so
    the order of depths reads the same in every figure."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib

    cmap = matplotlib.colormaps[DEPTH_CMAP]
    ds = sorted(depths)
    if len(ds) == 1:
        return {ds[0]: cmap(0.35)}
    return {d: cmap(0.85 - 0.8 * i / (len(ds) - 1)) for i, d in enumerate(ds)}


@contextmanager
def figure_style():
    """Context in which figures get the fixed style (Agg backend, ``RC``)."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib

    matplotlib.use("Agg", force=True)
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    with plt.rc_context(RC):
        yield plt


def producer() -> str:
    """A PDF's ``Producer``: the versions that decide its bytes, e.g.
    ``"matplotlib 3.11.2, fonttools 4.69.1"`` (the embedded font subset is fontTools' work)."""
    return ", ".join(f"{d} {importlib.metadata.version(d)}" for d in ("matplotlib", "fonttools"))


def save(fig, out_dir: str | Path, name: str, written: list[Path] | None = None) -> list[Path]:
    """Write ``fig`` as ``out_dir/name.png`` and ``out_dir/name.pdf`` through the store of
    ``out_dir`` (:func:`depthwidth.storage.open_results`; a local path or a URL); close it;
    return both paths. Metadata that would change from run to run (creation date) is dropped,
    and the PDF's Producer names the plotting stack (:func:`producer`), so a figure redrawn from
    the same records with the same stack has the same bytes, and a file that
    already holds them is left untouched (:meth:`~depthwidth.storage.ResultsStore.write_if_changed`).
    The paths actually (re)written are appended to ``written`` when one is given, so a caller
    can say which files changed."""
    # matplotlib: ~0.9 s at import; only figure drawing pays it
    import matplotlib.pyplot as plt

    # matplotlib: ~0.9 s at import; only figure drawing pays it
    from matplotlib.legend import Legend

    store = storage.open_results(out_dir)
    # A second legend added with ax.add_artist is not in the tight bounding box by default, and
    # an explicit list replaces the default one, so pass both.
    extra = fig.get_default_bbox_extra_artists()
    extra += [c for ax in fig.axes for c in ax.get_children() if isinstance(c, Legend) and c not in extra]
    paths = []
    for fmt, meta in (("png", {"Software": None}), ("pdf", {"CreationDate": None, "Creator": None, "Producer": producer()})):
        buf = io.BytesIO()  # rendered whole, then written in one atomic write (a rename, or one PUT)
        fig.savefig(buf, format=fmt, metadata=meta, bbox_extra_artists=extra)
        paths.append(store.path(f"{name}.{fmt}"))
        if store.write_if_changed(f"{name}.{fmt}", buf.getvalue()) and written is not None:
            written.append(paths[-1])
    plt.close(fig)
    return paths
