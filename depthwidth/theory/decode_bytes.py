"""Bytes one batch-B decode step reads: the memory traffic of generating a token with a KV cache.

A decode step (:meth:`depthwidth.models.model.LM.decode` with T = 1) multiplies one token's
activations by every weight matrix once, so at batch 1 it reads every weight once per token and
does 2 FLOPs per weight read: on a CPU its time is set by these bytes (Williams et al. 2009,
the roofline model; issue 44). Counted: each block's 12·d² + 13·d weights (d_ff = 4d, GPT-2
arrangement with biases and two LayerNorms), its K and V cache of S positions for B sequences
(2·B·S·d values: the step attends over all S and masks the unwritten tail), the tied head's
V·d weights and the final LayerNorm's 2d. Not counted: the one embedding row per token, and the
activations (O(d) per layer).
"""

from __future__ import annotations


def step_bytes(n_layer: int, d_model: int, vocab_size: int, cache_len: int, batch: int, itemsize: int) -> dict[str, int]:
    """Bytes of one decode step, ints: ``layer`` per block, ``head`` (V·d + 2d values), ``total`` =
    L·layer + head. ``itemsize``: bytes per value (4 for float32, 2 for bfloat16)."""
    layer = itemsize * (12 * d_model ** 2 + 13 * d_model + 2 * batch * cache_len * d_model)
    head = itemsize * (vocab_size * d_model + 2 * d_model)
    return {"layer": layer, "head": head, "total": n_layer * layer + head}
