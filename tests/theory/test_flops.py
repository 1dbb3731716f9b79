"""FLOPs per token, activation memory and arithmetic intensity, with values derived by hand."""

import numpy as np
import pytest

from depthwidth.errors import UserError
from depthwidth.theory.compute import (
    MFU_CONVENTION,
    activation_bytes_per_token,
    block_arithmetic_intensity,
    forward_flops_per_token,
    train_flops_per_token,
)

GPT2 = dict(n_layer=12, d_model=768, seq_len=1024, vocab_size=50257)


def test_gpt2_small_training_flops_both_conventions():
    # 6N = 6·84,934,656 = 509,607,936; head 6·V·d = 6·50,257·768 = 231,584,256;
    # causal attention 6·L·T·d = 6·12·1024·768 = 56,623,104; full attention twice that.
    assert MFU_CONVENTION == "causal"
    assert train_flops_per_token(**GPT2) == 509_607_936 + 231_584_256 + 56_623_104  # 797,815,296
    assert train_flops_per_token(**GPT2, convention="full") == 509_607_936 + 231_584_256 + 113_246_208
    assert train_flops_per_token(**GPT2, include_head=False) == 509_607_936 + 56_623_104


def test_forward_is_a_third_of_training():
    # 797,815,296 / 3 and 854,438,400 / 3
    assert forward_flops_per_token(**GPT2) == 265_938_432
    assert forward_flops_per_token(**GPT2, convention="full") == 284_812_800


def test_full_convention_is_nanogpt_up_to_biases():
    # nanoGPT estimate_mfu: 6·N_nano + 12·L·H·Q·T with N_nano = all parameters except wpe
    # = 124,439,808 − 786,432 = 123,653,376 (includes the tied wte, i.e. the head, and the
    # 121,344 bias/LayerNorm parameters that we leave out): 6·123,653,376 + 113,246,208.
    nanogpt = 6 * 123_653_376 + 12 * 12 * 1024 * 768
    assert nanogpt == 855_166_464
    biases_and_norms = 85_056_000 - 84_934_656  # stack minus Kaplan N
    assert train_flops_per_token(**GPT2, convention="full") + 6 * biases_and_norms == nanogpt


def test_other_mlp_width_changes_n():
    # L = 2, d = 64, d_ff = 100: N = 2·64·2·(128 + 100) = 58,368; T = 8, no vocab:
    # causal training = 6·58,368 + 6·2·8·64 = 350,208 + 6,144
    assert train_flops_per_token(2, 64, 8, d_ff=100) == 356_352


def test_flops_broadcast():
    out = train_flops_per_token(np.array([1, 2]), np.array([64, 64]), 8, include_head=False)
    # 6·12·L·64² + 6·L·8·64 = L·(294,912 + 3,072)
    np.testing.assert_array_equal(out, [297_984, 595_968])


def test_activation_memory_korthikanti():
    # Korthikanti et al. 2022 eq. 1, per token and layer: 34·d + 5·H·T bytes
    # = 34·768 + 5·12·1024 = 26,112 + 61,440
    m = activation_bytes_per_token(12, 768, 12, 1024)
    assert m["per_layer"] == 87_552
    assert m["stack"] == 12 * 87_552
    assert m["logits"] == 0 and m["total"] == 1_050_624
    # no dropout: attention 5·2d + 2HT, MLP 2d + 2·2·4d, norms 4d = 32d + 2HT = 24,576 + 24,576
    assert activation_bytes_per_token(1, 768, 12, 1024, dropout=False)["per_layer"] == 49_152
    # FlashAttention-style (scores recomputed), no dropout: 32d
    assert (
        activation_bytes_per_token(1, 768, 12, 1024, dropout=False, store_scores=False)["per_layer"] == 24_576
    )
    # fp32 doubles every stored value when there are no 1-byte masks
    assert (
        activation_bytes_per_token(1, 768, 12, 1024, dropout=False, bytes_per_value=4)["per_layer"] == 98_304
    )
    # logits: 2 bytes · 50,257
    assert activation_bytes_per_token(1, 768, 12, 1024, vocab_size=50257)["logits"] == 100_514


def test_block_arithmetic_intensity():
    # d = 768, B = 8192 tokens, p = 2: FLOPs 24·B·d² = 115,964,116,992;
    # bytes 2·(16·B·d + 12·d²) = 2·(100,663,296 + 7,077,888) = 215,482,368;
    # intensity 6·B·d / (p·(4B + 3d)) = 37,748,736 / 70,144
    r = block_arithmetic_intensity(768, 8192)
    assert r["flops"] == 115_964_116_992
    assert r["bytes"] == 215_482_368
    assert r["intensity"] == pytest.approx(37_748_736 / 70_144)
    # the output projection is a square n×n×n matmul at B = d: 2n³ / (p·3n²) = 2n/(3p)
    sq = block_arithmetic_intensity(768, 768)["matmuls"]["attn_proj"]
    assert sq["intensity"] == pytest.approx(2 * 768 / 6)
    # intensity rises with batch toward 1.5·d/p = 576
    assert block_arithmetic_intensity(768, 10**9)["intensity"] == pytest.approx(576, rel=1e-5)


@pytest.mark.parametrize(
    "call",
    [
        lambda: train_flops_per_token(12, 768, 1024, convention="flash"),
        lambda: train_flops_per_token(12, 768, 0),
        lambda: train_flops_per_token(0, 768, 1024),
        lambda: train_flops_per_token(12, 768, 1024, vocab_size=-3),
        lambda: activation_bytes_per_token(12, 770, 12, 1024),
        lambda: block_arithmetic_intensity(768, 0),
    ],
)
def test_bad_input(call):
    with pytest.raises(UserError):
        call()
