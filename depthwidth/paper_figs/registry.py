"""Every figure the package draws, registered once: its file name, its function, who draws it.

A :class:`Figure` names the file stem (``NAME.png`` and ``NAME.pdf``), the function that returns
``(matplotlib figure, caption)`` as a ``"module:function"`` string (imported only when drawn, so
this table costs no import of matplotlib, numpy or the figure modules), and its *producer*: either
:data:`LAW`, the law's figures that ``depthwidth figs`` and ``depthwidth reproduce`` draw in this
order from a results directory and a fit, :data:`PREDICTION` (fig7, from a prediction file and
measured fits), or the name of the experiment kind that draws it
(:mod:`depthwidth.pipeline.registry`). A law figure also says which inputs it takes (``takes``:
names from ``"inputs"``, the loaded :class:`~depthwidth.paper_figs.inputs.FigureInputs`, and
``"options"``, the :class:`~depthwidth.fits.options.FitOptions`); a kind's figure takes that
kind's analysis and is called by the kind's own ``draw``.

Adding a figure (ARCHITECTURE.md, "Where to add"): write the function, then :func:`register` it
here (a built-in: one more row of :data:`FIGURES`). Its module saves it under its registered name
with :func:`name_of`, so the name is typed once. ``tests/test_recipes.py`` does this for a toy.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

LAW = "law"  # the producer of the figures `depthwidth figs` draws
PREDICTION = "prediction"  # the producer of fig7, drawn by `depthwidth prediction-fig` from stored files
FORMS = "forms"  # the producer of fig8, drawn by `depthwidth forms-fig` from a form comparison


@dataclass(frozen=True)
class Figure:
    """One figure: ``name`` (the file stem), ``function`` (``"module:function"`` or the callable
    itself, returning ``(figure, caption)``), ``producer`` (:data:`LAW` or an experiment kind's
    name) and, for a law figure, ``takes`` (the names of its arguments, in order: ``"inputs"``,
    ``"options"``)."""

    name: str
    function: str | Callable[..., tuple[Any, str]]
    producer: str
    takes: tuple[str, ...] = ()

    @property
    def ref(self) -> str:
        """The function as ``"module:function"`` (how :func:`name_of` finds the figure)."""
        f = self.function
        return f if isinstance(f, str) else f"{f.__module__}:{f.__qualname__}"

    def load(self) -> Callable[..., tuple[Any, str]]:
        """The function itself (its module imported now). Raises ImportError/AttributeError for a
        reference that does not resolve (a programming error; the registry test checks them)."""
        if not isinstance(self.function, str):
            return self.function
        module, _, attr = self.function.partition(":")
        return getattr(importlib.import_module(module), attr)


_P = "depthwidth.paper_figs"
# The built-in figures; the law's in the order `figs` draws them (fig5 is seprank's: it needs the
# measured table, which `figs` does not read).
FIGURES: list[Figure] = [
    Figure("fig1_loss_vs_params", f"{_P}.figures:loss_vs_params", LAW, ("inputs",)),
    Figure("fig2_width_vs_depth", f"{_P}.figures:width_vs_depth", LAW, ("inputs",)),
    Figure("fig3_optimal_depth", f"{_P}.figures:optimal_depth", LAW, ("inputs",)),
    Figure("fig4_separation_rank", f"{_P}.figures:separation_rank", LAW, ()),
    Figure("fig6_pair_delta", f"{_P}.pair_delta_fig:pair_delta", LAW, ("inputs", "options")),
    Figure("fig5_measured_separation_rank", f"{_P}.seprank_fig:measured_separation_rank", "seprank"),
    Figure("fig7_prediction", f"{_P}.prediction_fig:prediction_vs_measurement", PREDICTION),
    Figure("fig8_law_forms", f"{_P}.forms_fig:forms_figure", FORMS),
    Figure("latency_vs_depth", f"{_P}.latency_fig:latency_vs_depth", "latency"),
    Figure("decode_latency_vs_depth", f"{_P}.decode_latency_fig:decode_latency_vs_depth", "latency"),
    Figure("exp_triple", f"{_P}.triple_fig:triple_figure", "triple"),
    Figure("exp_layerdrop", f"{_P}.layerdrop_fig:layerdrop_figure", "layerdrop"),
    Figure("exp_sawtooth", f"{_P}.sawtooth_fig:sawtooth_panels", "sawtooth"),
    Figure("exp_band", f"{_P}.band_fig:band_figure", "band"),
]


def register(fig: Figure) -> Figure:
    """Add ``fig`` to :data:`FIGURES` (last: a law figure is drawn after the built-in ones);
    returns it. Raises ValueError when its name or its function is registered already."""
    if any(f.name == fig.name for f in FIGURES):
        raise ValueError(f"figure {fig.name!r} is registered already")
    if any(f.ref == fig.ref for f in FIGURES):
        raise ValueError(f"{fig.ref} draws a registered figure already")
    FIGURES.append(fig)
    return fig


def unregister(name: str) -> None:
    """Remove the figure called ``name`` (a test's toy); KeyError when there is none."""
    FIGURES.remove(get(name))


def get(name: str) -> Figure:
    """The figure called ``name``; KeyError when none is."""
    for f in FIGURES:
        if f.name == name:
            return f
    raise KeyError(f"no figure {name!r} is registered (depthwidth.paper_figs.registry)")


def of(producer: str) -> list[Figure]:
    """The figures ``producer`` (:data:`LAW` or a kind's name) draws, in registration order."""
    return [f for f in FIGURES if f.producer == producer]


def names(producer: str | None = None) -> tuple[str, ...]:
    """The registered names (of one producer's figures, with ``producer``), in order."""
    return tuple(f.name for f in FIGURES if producer is None or f.producer == producer)


def name_of(function: Callable[..., Any]) -> str:
    """The registered file name of the figure ``function`` draws; KeyError when it is not
    registered (the figure module's own ``draw`` uses this, so the name is typed once)."""
    ref = f"{function.__module__}:{function.__qualname__}"
    for f in FIGURES:
        if f.ref == ref:
            return f.name
    raise KeyError(f"{ref} draws no registered figure (depthwidth.paper_figs.registry.FIGURES)")
