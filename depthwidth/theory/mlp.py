"""Parameter arithmetic for fully connected ReLU networks (docs/concepts.md, depth separation).

A dense layer a→b costs a·b + b parameters (weights plus bias). A network with one hidden layer
of m units between d_in inputs and d_out outputs costs m·(d_in + d_out + 1) + d_out: every
hidden unit pays its full fan-in, its bias and its fan-out. Comparing a deep narrow trunk with
the widest single hidden layer of the same budget shows how few "units of width" a parameter
budget buys when spent on one layer.
"""

from __future__ import annotations

from collections.abc import Sequence

from depthwidth.theory.validate import positive_int


def dense_params(d_in: int, d_out: int) -> int:
    """Parameters of a dense layer d_in→d_out with bias: d_in·d_out + d_out. Raises UserError."""
    a = positive_int(d_in, "d_in")
    b = positive_int(d_out, "d_out")
    return a * b + b


def mlp_params(d_in: int, hidden: Sequence[int], d_out: int) -> int:
    """Parameters of the MLP d_in → hidden[0] → … → hidden[-1] → d_out (sum of a·b + b).

    An empty ``hidden`` is the single dense layer d_in→d_out. Raises UserError on a size < 1.
    """
    widths = [positive_int(d_in, "d_in")]
    widths += [positive_int(w, "hidden width") for w in hidden]
    widths.append(positive_int(d_out, "d_out"))
    return sum(dense_params(a, b) for a, b in zip(widths[:-1], widths[1:]))


def single_hidden_layer_params(d_in: int, m: int, d_out: int) -> int:
    """Cost of one hidden layer of m units: m·(d_in + d_out + 1) + d_out (m >= 0).

    m = 0 leaves only the output bias (a constant function). Raises UserError on bad sizes.
    """
    a = positive_int(d_in, "d_in")
    b = positive_int(d_out, "d_out")
    units = positive_int(m, "units", minimum=0)
    return units * (a + b + 1) + b


def widest_single_hidden_layer(budget: int, d_in: int, d_out: int) -> int:
    """The most units m of one hidden layer with m·(d_in + d_out + 1) + d_out <= budget.

    Returns floor((budget − d_out) / (d_in + d_out + 1)), or 0 when not even one unit fits.
    Raises UserError on bad sizes.
    """
    n = positive_int(budget, "budget")
    a = positive_int(d_in, "d_in")
    b = positive_int(d_out, "d_out")
    return max(0, (n - b) // (a + b + 1))


def mlp_summary(d_in: int, hidden: Sequence[int], d_out: int) -> dict:
    """Parameters of an MLP and the widest one-hidden-layer network of the same budget.

    Returns:
        dict with ``params`` (the MLP's count), ``hidden_units`` (sum of its hidden widths),
        ``unit_cost`` (d_in + d_out + 1, parameters per unit of a single hidden layer),
        ``equal_budget_single_layer_width`` (:func:`widest_single_hidden_layer` of ``params``)
        and ``single_layer_params`` (that network's exact count, <= params).

    Raises:
        UserError: on a size < 1.
    """
    params = mlp_params(d_in, hidden, d_out)
    m = widest_single_hidden_layer(params, d_in, d_out)
    return {
        "d_in": int(d_in),
        "hidden": [int(w) for w in hidden],
        "d_out": int(d_out),
        "params": params,
        "hidden_units": sum(int(w) for w in hidden),
        "unit_cost": int(d_in) + int(d_out) + 1,
        "equal_budget_single_layer_width": m,
        "single_layer_params": single_hidden_layer_params(d_in, m, d_out),
    }
