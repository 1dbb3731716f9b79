"""FLOPs per token (two named attention conventions), activation memory, matmul arithmetic intensity.

FLOPs (Kaplan et al. 2020 §2.1, Table 1; docs/concepts.md): a multiply-add is 2 FLOPs, so a token's forward pass through the weight
matrices costs 2·N with N = 12·L·d² (Kaplan et al. 2020, Table 1); the backward pass costs twice
the forward, so training is 3× forward = 6·N. Attention scores and the weighted sum over values
(QKᵀ and A·V) add, per layer and token, 2·T·d multiply-adds each over the full T×T score matrix:

==========  ============================  ===================  ==========================
convention  forward attention / token      training / token     used by
==========  ============================  ===================  ==========================
"full"      4·L·T·d                        12·L·T·d             nanoGPT ``estimate_mfu``,
                                                                 PaLM (Chowdhery et al. 2022,
                                                                 App. B)
"causal"    2·L·T·d  (only the causal      6·L·T·d              MaxText
            half of the T×T matrix)                              (``calculate_tflops_training
                                                                 _per_device``), Kaplan 2020
                                                                 Table 1 (2·L·T·d forward)
==========  ============================  ===================  ==========================

**Convention for every MFU figure in this project:** ``train_flops_per_token(...,
convention="causal", include_head=True)`` = 6·N + 6·V·d + 6·L·T·d, with N = 12·L·d² the matmul
weights of the stack (biases, LayerNorms, GELU and softmax are O(d) per token and left out) and
6·V·d the output-head matmul (logits), which is real work whether or not the head is tied to the
token table. The embedding lookups cost no FLOPs. nanoGPT's number is the ``"full"`` convention
with the head included (its N counts the tied ``wte``), up to the O(d) bias terms.
"""

from __future__ import annotations

import numpy as np

from depthwidth.errors import UserError
from depthwidth.theory.accounting import kaplan_params
from depthwidth.theory.validate import positive_int
from depthwidth.units import abbreviate

CONVENTIONS = {
    "causal": "MaxText/Kaplan: causal half of the score matrix, training attention 6*L*T*d",
    "full": "nanoGPT/PaLM: full T x T score matrix, training attention 12*L*T*d",
}
MFU_CONVENTION = "causal"
"""The attention convention of every MFU figure this project prints."""


def _convention(convention: str) -> str:
    if convention not in CONVENTIONS:
        raise UserError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    return convention


def forward_flops_per_token(
    n_layer,
    d_model,
    seq_len,
    vocab_size=0,
    convention: str = MFU_CONVENTION,
    include_head: bool = True,
    d_ff=None,
):
    """Forward FLOPs per token: 2·N + 2·V·d (head) + attention (4·L·T·d full, 2·L·T·d causal).

    Args:
        n_layer, d_model: depth L and width d (ints or int arrays, >= 1).
        seq_len: context T in tokens (>= 1).
        vocab_size: V (>= 0); the head matmul costs 2·V·d when ``include_head``.
        convention: "causal" (default, MaxText) or "full" (nanoGPT/PaLM); see module table.
        include_head: count the output-head (logits) matmul.
        d_ff: MLP hidden width (default 4·d); N = 2·d·L·(2d + d_ff).

    Returns:
        FLOPs per token (int; int64 array when inputs are arrays).

    Raises:
        UserError: bad sizes or unknown convention.

    Source: Kaplan et al. 2020 Table 1.
    """
    conv = _convention(convention)
    L = positive_int(n_layer, "n_layer")
    d = positive_int(d_model, "d_model")
    T = positive_int(seq_len, "seq_len")
    V = positive_int(vocab_size, "vocab_size", minimum=0)
    attn = (4 if conv == "full" else 2) * L * T * d
    head = 2 * V * d if include_head else 0
    return 2 * kaplan_params(L, d, d_ff) + head + attn


def train_flops_per_token(
    n_layer,
    d_model,
    seq_len,
    vocab_size=0,
    convention: str = MFU_CONVENTION,
    include_head: bool = True,
    d_ff=None,
):
    """Training (forward + backward) FLOPs per token: 3× :func:`forward_flops_per_token`.

    With the defaults this is the project's MFU numerator: 6·N + 6·V·d + 6·L·T·d ("causal",
    MaxText); ``convention="full"`` gives nanoGPT's 6·N + 6·V·d + 12·L·T·d. Arguments, returns
    and errors as in :func:`forward_flops_per_token`. Source: Kaplan et al. 2020 §2.1 (C ≈ 6N per
    token) and Table 1.
    """
    return 3 * forward_flops_per_token(n_layer, d_model, seq_len, vocab_size, convention, include_head, d_ff)


def activation_bytes_per_token(
    n_layer,
    d_model,
    n_head,
    seq_len,
    d_ff=None,
    bytes_per_value: int = 2,
    dropout: bool = True,
    store_scores: bool = True,
    vocab_size=0,
):
    """Activation memory stored for the backward pass, per token, without recomputation.

    Per layer and token, with p = ``bytes_per_value`` and 1-byte dropout masks, following
    Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
    §4.1, eq. 1, which gives s·b·h·(34 + 5·a·s/h) bytes per layer at p = 2, d_ff = 4h):

    - attention: LN output p·d, Q and K 2p·d, V p·d, scores p·H·T, output-projection input
      p·d; with dropout also the score mask H·T, the dropped scores p·H·T and the output mask d;
    - MLP: input p·d, GELU input and output 2p·d_ff; with dropout the mask d;
    - the two LayerNorm inputs 2p·d.

    At the defaults this is exactly 34·d + 5·H·T bytes per layer. ``store_scores=False`` models
    FlashAttention-style kernels that recompute the H·T score terms. ``vocab_size`` adds the
    logits, p·V per token (our addition; the paper leaves the head out).

    Returns:
        dict of bytes per token: ``per_layer``, ``stack`` (L · per_layer), ``logits``, ``total``.

    Raises:
        UserError: bad sizes, or ``n_head`` not dividing ``d_model``.
    """
    L = positive_int(n_layer, "n_layer")
    d = positive_int(d_model, "d_model")
    H = positive_int(n_head, "n_head")
    T = positive_int(seq_len, "seq_len")
    p = positive_int(bytes_per_value, "bytes_per_value")
    V = positive_int(vocab_size, "vocab_size", minimum=0)
    f = 4 * d if d_ff is None else positive_int(d_ff, "d_ff")
    if np.any(np.asarray(d) % np.asarray(H) != 0):
        raise UserError(f"width {abbreviate(d_model)} is not divisible by the number of heads {abbreviate(n_head)}")
    scores = p * H * T if store_scores else 0
    attn = 5 * p * d + scores
    mlp = p * d + 2 * p * f
    norms = 2 * p * d
    if dropout:
        attn = attn + d + ((H * T + p * H * T) if store_scores else 0)
        mlp = mlp + d
    per_layer = attn + mlp + norms
    logits = p * V
    return {"per_layer": per_layer, "stack": L * per_layer, "logits": logits, "total": L * per_layer + logits}


def block_arithmetic_intensity(d_model, batch_tokens, d_ff=None, bytes_per_value: int = 2) -> dict:
    """FLOPs per byte of the four weight matmuls of one block at a batch of B tokens.

    A matmul (B×a)·(a×b) does 2·B·a·b FLOPs and moves p·(B·a + a·b + B·b) bytes (read input and
    weights once, write output once: the roofline minimum). The block's matmuls are QKV d→3d,
    attention output d→d, MLP d→d_ff and d_ff→d; the score and value products (activation ×
    activation) are not included. At d_ff = 4d the block totals are 24·B·d² FLOPs and
    p·(16·B·d + 12·d²) bytes, so intensity = 6·B·d / (p·(4·B + 3·d)), which tends to 1.5·d/p as
    B grows and to 2·B/p as d grows.

    Args:
        d_model: width d; batch_tokens: B = batch size × sequence length (tokens per step);
        d_ff: MLP hidden width (default 4·d); bytes_per_value: p (2 for bf16).

    Returns:
        dict with ``flops``, ``bytes``, ``intensity`` (FLOP/byte) for the block and ``matmuls``
        (name → the same three numbers).

    Raises:
        UserError: bad sizes. Source: Williams et al. 2009 (roofline).
    """
    d = positive_int(d_model, "d_model")
    B = positive_int(batch_tokens, "batch_tokens")
    p = positive_int(bytes_per_value, "bytes_per_value")
    if np.ndim(d) or np.ndim(B):
        raise UserError("block_arithmetic_intensity takes scalars")
    f = 4 * d if d_ff is None else positive_int(d_ff, "d_ff")
    shapes = {"attn_qkv": (d, 3 * d), "attn_proj": (d, d), "mlp_fc": (d, f), "mlp_proj": (f, d)}
    matmuls = {}
    for name, (a, b) in shapes.items():
        flops = 2 * B * a * b
        moved = p * (B * a + a * b + B * b)
        matmuls[name] = {"flops": flops, "bytes": moved, "intensity": flops / moved}
    flops = sum(m["flops"] for m in matmuls.values())
    moved = sum(m["bytes"] for m in matmuls.values())
    return {"flops": flops, "bytes": moved, "intensity": flops / moved, "matmuls": matmuls}
