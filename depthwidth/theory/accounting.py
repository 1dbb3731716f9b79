"""Exact parameter accounting for the GPT-2 block arrangement, and equal-budget shape families.

The block (Radford et al. 2019, the GPT-2 code; HF ``GPT2Block``) is pre-LN:
``x + attn(ln_1(x))`` then ``x + mlp(ln_2(x))`` with

=================  ===========================  =====================
component          shape (weights, bias)         parameters
=================  ===========================  =====================
ln_1, ln_2         scale d, bias d (each)        4·d
attn.c_attn (QKV)  d×3d, 3d                      3·d² + 3·d
attn.c_proj        d×d, d                        d² + d
mlp.c_fc           d×d_ff, d_ff                  d·d_ff + d_ff
mlp.c_proj         d_ff×d, d                     d_ff·d + d
=================  ===========================  =====================

so one block holds 4d² + 2·d·d_ff + d_ff + 9d, which is 12d² + 13d at the default d_ff = 4d.
A stack of L blocks plus the final LayerNorm (``ln_f``, 2d) holds L·(12d² + 13d) + 2d: exactly
the parameters of HF ``GPT2LMHeadModel`` minus ``transformer.wte`` and ``transformer.wpe``.
The head count H does not change any count (the QKV projection is d→3d whatever H is); it is only
checked to divide d.

Kaplan et al. 2020 (§2.1, eq. 2.1) count only the weight matrices: N = 2·d·L·(2·d_attn + d_ff),
which is 12·L·d² at d_attn = d, d_ff = 4d. Embeddings cost V·d (tokens) plus T·d (learned
positions); an untied output head costs another V·d (no bias, as in GPT-2).

All scalar results are exact Python ints. The formula functions (``block_params``,
``stack_params``, ``kaplan_params``, ``width_for_budget``) also broadcast over numpy arrays
(int64 for counts, exact below 9.2e18 parameters).

The two counts are written once, in :func:`kaplan_n` and :func:`stack_n`: the bare formulas,
for whole or real-valued shapes (a fitted optimal depth of 40.2 layers) and arrays, with no
validation. Every other count in the package (records, the results table, presets,
projections, figures) calls them; ``kaplan_params`` and ``stack_params`` are the same counts
with their sizes validated. numpy loads only when a function needs it, so importing this module
stays light (it is on the ``depthwidth query`` path).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from depthwidth.errors import UserError
from depthwidth.theory.validate import heads_divide_width, positive_int, positive_real

COUNTS = ("kaplan", "stack")
"""Which parameter count a budget refers to: Kaplan's N = 12·L·d², or the exact stack count."""


def kaplan_n(n_layer, d_model, d_ff=None):
    """Kaplan's non-embedding count N = 12·L·d² (= 2·d·L·(2d + d_ff) with an explicit d_ff): the N
    of Levine et al.'s law. Kaplan et al. 2020, §2.1, eq. (2.1) with d_attn = d_model.

    The formula alone, for ints (exact), reals and arrays alike; no validation (``kaplan_params``).
    """
    if d_ff is None:
        return 12 * n_layer * d_model * d_model
    return 2 * d_model * n_layer * (2 * d_model + d_ff)


def stack_n(n_layer, d_model, d_ff=None):
    """The exact count of L GPT-2 blocks plus the final LayerNorm: L·(4d² + 2·d·d_ff + d_ff + 9d)
    + 2d, which is L·(12d² + 13d) + 2d at d_ff = 4d (module table; docs/concepts.md).

    The formula alone, for ints (exact), reals and arrays alike; no validation (``stack_params``).
    """
    if d_ff is None:
        return n_layer * (12 * d_model * d_model + 13 * d_model) + 2 * d_model
    return n_layer * (4 * d_model * d_model + 2 * d_model * d_ff + d_ff + 9 * d_model) + 2 * d_model


def _d_ff(d_model, d_ff):
    return 4 * d_model if d_ff is None else positive_int(d_ff, "d_ff")


def block_breakdown(d_model, d_ff=None) -> dict:
    """Parameters of one GPT-2 block by component (see the module table).

    Args:
        d_model: width d (int or int array).
        d_ff: MLP hidden width; default 4·d.

    Returns:
        dict with ``attn_qkv`` (3d²+3d), ``attn_proj`` (d²+d), ``mlp_fc`` (d·d_ff+d_ff),
        ``mlp_proj`` (d_ff·d+d), ``layernorms`` (4d); counts in parameters.

    Raises:
        UserError: on a non-positive or fractional size.
    """
    d = positive_int(d_model, "d_model")
    f = _d_ff(d, d_ff)
    return {
        "attn_qkv": 3 * d * d + 3 * d,
        "attn_proj": d * d + d,
        "mlp_fc": d * f + f,
        "mlp_proj": f * d + d,
        "layernorms": 4 * d,
    }


def block_params(d_model, d_ff=None):
    """Parameters of one GPT-2 block: 4d² + 2·d·d_ff + d_ff + 9d (= 12d² + 13d at d_ff = 4d).

    Source: Radford et al. 2019 (GPT-2 arrangement). Broadcasts over arrays. Raises UserError on bad sizes.
    """
    return sum(block_breakdown(d_model, d_ff).values())


def stack_params(n_layer, d_model, d_ff=None):
    """Exact non-embedding parameters: L blocks plus the final LayerNorm, L·(12d²+13d) + 2d.

    This is HF ``GPT2LMHeadModel`` without ``transformer.wte``/``transformer.wpe`` (and without an
    untied ``lm_head``). Source: Radford et al. 2019 (GPT-2, untied head as in HF). Broadcasts over arrays. Raises UserError on bad sizes.
    """
    L = positive_int(n_layer, "n_layer")
    d = positive_int(d_model, "d_model")
    return stack_n(L, d, None if d_ff is None else _d_ff(d, d_ff))


def kaplan_params(n_layer, d_model, d_ff=None):
    """Kaplan's non-embedding count N = 2·d·L·(2d + d_ff) = 12·L·d² at d_ff = 4d.

    Only weight matrices; biases and LayerNorms are left out. Source: Kaplan et al. 2020, §2.1,
    eq. (2.1) with d_attn = d_model. Broadcasts over arrays. Raises UserError on bad sizes.
    """
    L = positive_int(n_layer, "n_layer")
    d = positive_int(d_model, "d_model")
    return kaplan_n(L, d, None if d_ff is None else _d_ff(d, d_ff))


def param_counts(
    n_layer: int,
    d_model: int,
    n_head: int = 1,
    vocab_size: int = 0,
    seq_len: int = 0,
    tied_head: bool = True,
    d_ff: int | None = None,
) -> dict:
    """All parameter counts of a GPT-2-arrangement decoder LM, exact, broken down by component.

    Args:
        n_layer: depth L (>= 1).
        d_model: width d (>= 1, divisible by ``n_head``).
        n_head: heads H (>= 1); checked to divide d, changes no count.
        vocab_size: V (>= 0; 0 leaves out the token table and the head).
        seq_len: T, rows of the learned position table (>= 0).
        tied_head: True: the output head reuses the token table (0 extra parameters);
            False: a separate V×d head without bias (GPT-2 ``lm_head`` has no bias).
        d_ff: MLP hidden width, default 4·d.

    Returns:
        dict (counts in parameters) with ``stack_params`` (exact non-embedding count incl. the
        final LayerNorm), ``kaplan_params`` (12·L·d²), ``embedding_params`` (V·d + T·d),
        ``head_params`` (0 or V·d), ``non_embedding_params`` (= stack_params, Kaplan's split),
        ``total_params`` (stack + embedding + head), ``breakdown`` (per component, summed over
        layers) and the shape echoed back.

    Raises:
        UserError: zero/negative/fractional sizes, or ``n_head`` not dividing ``d_model``.

    Source: Kaplan et al. 2020 §2.1. GPT-2 small (12, 768, 12, V=50257, T=1024,
    tied) gives 124,439,808 in total.
    """
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    L = positive_int(n_layer, "n_layer")
    d = positive_int(d_model, "d_model")
    H = positive_int(n_head, "n_head")
    V = positive_int(vocab_size, "vocab_size", minimum=0)
    T = positive_int(seq_len, "seq_len", minimum=0)
    if not np.ndim(L) == np.ndim(d) == np.ndim(H) == 0:
        raise UserError("param_counts takes scalars; use stack_params/kaplan_params for arrays")
    heads_divide_width(d, H)
    f = _d_ff(d, d_ff)
    per_block = block_breakdown(d, f)
    breakdown = {k: L * v for k, v in per_block.items()}
    breakdown["final_layernorm"] = 2 * d
    stack = sum(breakdown.values())
    tok, pos = V * d, T * d
    head = 0 if tied_head else V * d
    breakdown.update(token_embedding=tok, position_embedding=pos, head=head)
    return {
        "n_layer": L,
        "d_model": d,
        "n_head": H,
        "d_ff": f,
        "vocab_size": V,
        "seq_len": T,
        "tied_head": bool(tied_head),
        "stack_params": stack,
        "kaplan_params": kaplan_params(L, d, f),
        "embedding_params": tok + pos,
        "head_params": head,
        "non_embedding_params": stack,
        "total_params": stack + tok + pos + head,
        "breakdown": breakdown,
    }


def width_for_budget(budget, n_layer, count: str = "kaplan"):
    """The real width d at which depth L spends exactly ``budget`` non-embedding parameters.

    ``count="kaplan"`` solves 12·L·d² = N, so d = sqrt(N / (12·L)); ``count="stack"`` solves the
    exact 12·L·d² + (13·L + 2)·d − N = 0 for its positive root (d_ff = 4d in both).

    Args:
        budget: N in parameters (float or array, > 0).
        n_layer: depth L (int or int array, >= 1).
        count: "kaplan" or "stack".

    Returns:
        float width (or float array), not rounded.

    Raises:
        UserError: non-positive budget or depth, or an unknown ``count``.

    Source: inverse of Kaplan et al. 2020 eq. (2.1).
    """
    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    if count not in COUNTS:
        raise UserError(f"count must be one of {', '.join(COUNTS)}, got {count!r}")
    N = np.asarray(budget, dtype=float)
    if np.any(~np.isfinite(N)) or np.any(N <= 0):
        raise UserError(f"budget must be a finite number > 0, got {budget!r}")
    L = np.asarray(positive_int(n_layer, "n_layer"), dtype=float)
    if count == "kaplan":
        d = np.sqrt(N / (12.0 * L))
    else:
        b = 13.0 * L + 2.0
        # Citardauq form of the positive root: no cancellation when 48·L·N << b².
        d = 2.0 * N / (b + np.sqrt(b * b + 48.0 * L * N))
    return float(d) if np.ndim(d) == 0 else d


def _count(n_layer: int, d_model: int, count: str) -> int:
    return kaplan_params(n_layer, d_model) if count == "kaplan" else stack_params(n_layer, d_model)


def shape_family(
    budget,
    depths: Iterable[int],
    count: str = "kaplan",
    multiple_of: int = 1,
) -> list[dict]:
    """Equal-budget shapes: for each depth, the whole width whose parameter count is nearest the budget.

    Args:
        budget: N in parameters (> 0), in the chosen ``count``.
        depths: depths L (each >= 1).
        count: "kaplan" (12·L·d²) or "stack" (L·(12d²+13d)+2d).
        multiple_of: widths are multiples of this (1, the head count, or 64 for tiling);
            of the two multiples around the real solution, the one whose count is nearer
            the budget wins; never below one multiple.

    Returns:
        one dict per depth: ``n_layer``, ``d_model`` (int), ``d_model_exact`` (float),
        ``kaplan_params``, ``stack_params`` (exact ints), ``params`` (the chosen count) and
        ``rel_deviation`` = params / budget − 1, ``aspect_ratio`` = d / L (Kaplan et al. 2020 §3.1).

    Raises:
        UserError: non-positive budget, depth or multiple; unknown count.

    Source: docs/concepts.md, two knobs (12×768², 3×1536² and 27×512² share one budget).
    """
    N = positive_real(budget, "budget")
    m = positive_int(multiple_of, "multiple_of")
    Ls = [positive_int(L, "depth") for L in depths]
    if not Ls:
        raise UserError("depths is empty")
    out = []
    for L in Ls:
        exact = width_for_budget(N, L, count)
        lo = max(m, math.floor(exact / m) * m)
        hi = max(m, math.ceil(exact / m) * m)
        d = min((lo, hi), key=lambda w: (abs(_count(L, w, count) - N), w))
        params = _count(L, d, count)
        out.append(
            {
                "n_layer": L,
                "d_model": d,
                "d_model_exact": exact,
                "kaplan_params": kaplan_params(L, d),
                "stack_params": stack_params(L, d),
                "params": params,
                "rel_deviation": params / N - 1.0,
                "aspect_ratio": d / L,
            }
        )
    return out
