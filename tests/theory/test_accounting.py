"""Parameter accounting (GPT-2 arrangement, docs/concepts.md): every expected value is derived by hand in the test."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from depthwidth.errors import UserError
from depthwidth.theory.accounting import (
    block_breakdown,
    block_params,
    kaplan_params,
    param_counts,
    shape_family,
    stack_params,
    width_for_budget,
)


def test_block_of_gpt2_small_width():
    # 12·768² + 13·768 = 12·589,824 + 9,984 = 7,077,888 + 9,984
    assert block_params(768) == 7_087_872
    parts = block_breakdown(768)
    assert parts["attn_qkv"] == 3 * 589_824 + 3 * 768  # 1,771,776
    assert parts["attn_proj"] == 589_824 + 768
    assert parts["mlp_fc"] == 768 * 3072 + 3072
    assert parts["mlp_proj"] == 3072 * 768 + 768
    assert parts["layernorms"] == 4 * 768


def test_gpt2_small_known_total():
    r = param_counts(12, 768, 12, vocab_size=50257, seq_len=1024, tied_head=True)
    # stack: 12·7,087,872 + 2·768 = 85,054,464 + 1,536
    assert r["stack_params"] == 85_056_000
    assert r["non_embedding_params"] == 85_056_000
    # Kaplan N = 12·12·768² = 144·589,824
    assert r["kaplan_params"] == 84_934_656
    # V·d + T·d = 50,257·768 + 1,024·768 = 38,597,376 + 786,432
    assert r["embedding_params"] == 39_383_808
    assert r["head_params"] == 0
    # the published GPT-2 small size: 85,056,000 + 39,383,808
    assert r["total_params"] == 124_439_808
    b = r["breakdown"]
    assert b["attn_qkv"] == 12 * 1_771_776
    assert b["final_layernorm"] == 1_536
    assert b["token_embedding"] == 38_597_376
    assert b["position_embedding"] == 786_432
    assert sum(b.values()) == r["total_params"]


def test_untied_head_adds_vocab_times_width_without_bias():
    r = param_counts(12, 768, 12, vocab_size=50257, seq_len=1024, tied_head=False)
    assert r["head_params"] == 50257 * 768  # 38,597,376
    assert r["total_params"] == 124_439_808 + 38_597_376  # 163,037,184


def test_other_mlp_width():
    # d = 64, d_ff = 100: qkv 3·4096+192 = 12,480; proj 4096+64 = 4,160; fc 6,400+100 = 6,500;
    # proj2 6,400+64 = 6,464; LNs 256: block 29,860; two blocks + final LN 128 = 59,848.
    assert block_params(64, d_ff=100) == 29_860
    assert stack_params(2, 64, d_ff=100) == 59_848
    # Kaplan: 2·d·L·(2d + d_ff) = 2·64·2·228
    assert kaplan_params(2, 64, d_ff=100) == 58_368
    r = param_counts(2, 64, n_head=4, d_ff=100)
    assert r["stack_params"] == 59_848 and r["d_ff"] == 100


def test_heads_change_no_count():
    # The QKV projection is d→3d whatever H is, so H only has to divide d.
    counts = {param_counts(2, 96, h)["stack_params"] for h in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96)}
    assert counts == {2 * (12 * 96**2 + 13 * 96) + 2 * 96}  # 2·(110,592 + 1,248) + 192 = 223,872
    assert counts == {223_872}


def test_design_equal_budget_triple():
    # 12·768², 3·1536² and 27·512² weigh the same: 12·L·d² = 84,934,656 for each.
    assert kaplan_params(12, 768) == kaplan_params(3, 1536) == kaplan_params(27, 512) == 84_934_656


def test_formulas_broadcast_over_arrays():
    L = np.array([1, 2])
    d = np.array([64, 128])
    # 1·(12·4096 + 13·64) + 128 = 49,152 + 832 + 128; 2·(12·16,384 + 13·128) + 256 = 396,544 + 256
    np.testing.assert_array_equal(stack_params(L, d), [50_112, 396_800])
    np.testing.assert_array_equal(kaplan_params(L, d), [12 * 4096, 24 * 16_384])


def test_width_for_budget_inverts_both_counts():
    # sqrt(84,934,656 / (12·12)) = sqrt(589,824) = 768
    assert width_for_budget(84_934_656, 12) == 768.0
    # the exact stack count of 12 × 768 is 85,056,000 (above); its inverse is 768 again
    assert width_for_budget(85_056_000, 12, count="stack") == pytest.approx(768.0, rel=1e-12)
    np.testing.assert_allclose(width_for_budget(84_934_656, np.array([3, 27])), [1536.0, 512.0])


def test_shape_family_exact_and_rounded():
    shapes = shape_family(84_934_656, [3, 12, 27])
    assert [s["d_model"] for s in shapes] == [1536, 768, 512]
    assert all(s["rel_deviation"] == 0.0 for s in shapes)
    assert [s["aspect_ratio"] for s in shapes] == [512.0, 64.0, 512 / 27]
    # 1e8 at depth 12: d = sqrt(1e8/144) = 833.3; multiples of 64 around it are 832 and 896;
    # 144·832² = 99,680,256 (−0.32%) beats 144·896² = 115,605,504.
    (s,) = shape_family(1e8, [12], multiple_of=64)
    assert s["d_model"] == 832
    assert s["params"] == 99_680_256
    assert s["rel_deviation"] == pytest.approx(99_680_256 / 1e8 - 1)
    assert s["stack_params"] == 12 * (12 * 832**2 + 13 * 832) + 2 * 832


def test_shape_family_never_below_one_multiple():
    (s,) = shape_family(100, [10], multiple_of=64)  # real width 0.9, rounded up to 64
    assert s["d_model"] == 64


@pytest.mark.parametrize(
    "call",
    [
        lambda: param_counts(0, 768, 12),
        lambda: param_counts(12, -768, 12),
        lambda: param_counts(12, 770, 12),  # 770 / 12 is not whole
        lambda: param_counts(12, 768, 0),
        lambda: param_counts(12, 768, 12, vocab_size=-1),
        lambda: param_counts(12.5, 768, 12),
        lambda: param_counts(True, 768, 1),
        lambda: stack_params(np.array([1, 0]), 64),
        lambda: width_for_budget(0, 12),
        lambda: width_for_budget(1e6, 12, count="exact"),
        lambda: shape_family(1e6, []),
        lambda: shape_family(1e6, [3], multiple_of=0),
        lambda: shape_family(float("nan"), [3]),
    ],
)
def test_bad_sizes_raise_user_error(call):
    with pytest.raises(UserError):
        call()


def test_shape_family_stack_count():
    # the exact count of 12 × 768 is 85,056,000, so that budget gives back 768 with no deviation
    (s,) = shape_family(85_056_000, [12], count="stack")
    assert (s["d_model"], s["params"], s["rel_deviation"]) == (768, 85_056_000, 0.0)


@given(L=st.integers(1, 200), d=st.integers(1, 20_000))
def test_width_for_budget_roundtrip(L, d):
    # the inverse of either count, applied to the count of (L, d), returns d
    assert width_for_budget(kaplan_params(L, d), L) == pytest.approx(d, rel=1e-12)
    assert width_for_budget(stack_params(L, d), L, count="stack") == pytest.approx(d, rel=1e-9)
    assert stack_params(L, d) == L * (12 * d * d + 13 * d) + 2 * d
