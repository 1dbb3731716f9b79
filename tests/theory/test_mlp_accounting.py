"""MLP parameter arithmetic (docs/concepts.md, depth separation): a dense a→b layer costs a·b + b."""

import pytest

from depthwidth.errors import UserError
from depthwidth.theory.mlp import (
    dense_params,
    mlp_params,
    mlp_summary,
    single_hidden_layer_params,
    widest_single_hidden_layer,
)


def test_dense_and_stacked():
    assert dense_params(1, 2) == 4  # 1·2 + 2
    # 1→2→2→2→1: 4 + 6 + 6 + 3 (the depth-3 sawtooth network)
    assert mlp_params(1, [2, 2, 2], 1) == 19
    assert mlp_params(3, [], 2) == 8  # a single dense 3→2: 6 + 2


def test_widest_single_layer_of_equal_budget():
    # one hidden unit between 1 input and 1 output costs 1 + 1 + 1 = 3; (19 − 1) // 3 = 6 units
    assert widest_single_hidden_layer(19, 1, 1) == 6
    assert single_hidden_layer_params(1, 6, 1) == 19
    # 784→256→256→10: 200,960 + 65,792 + 2,570 = 269,322 parameters; a unit costs 795;
    # (269,322 − 10) // 795 = 338 (795·338 = 268,710 <= 269,312 < 795·339 = 269,505)
    r = mlp_summary(784, [256, 256], 10)
    assert r["params"] == 269_322
    assert r["unit_cost"] == 795
    assert r["equal_budget_single_layer_width"] == 338
    assert r["single_layer_params"] == 338 * 795 + 10
    assert r["hidden_units"] == 512


def test_budget_below_one_unit():
    assert widest_single_hidden_layer(5, 4, 1) == 0  # one unit costs 6 + the bias 1
    assert single_hidden_layer_params(4, 0, 1) == 1


@pytest.mark.parametrize(
    "call",
    [
        lambda: mlp_params(0, [2], 1),
        lambda: mlp_params(1, [2, 0], 1),
        lambda: dense_params(1, -1),
        lambda: widest_single_hidden_layer(0, 1, 1),
        lambda: single_hidden_layer_params(1, -1, 1),
    ],
)
def test_bad_sizes(call):
    with pytest.raises(UserError):
        call()
