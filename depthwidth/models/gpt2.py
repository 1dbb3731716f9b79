"""GPT-2 compatibility: Hugging Face ``GPT2LMHeadModel`` state dicts <-> our stacked :class:`LM`.

Our LM is GPT-2's arrangement (Radford et al. 2019), so the mapping is one-to-one
except for layout: HF keeps one module per block (``transformer.h.{i}.*``) while we keep each
parameter once, stacked on a leading ``layers`` axis of length L (run with ``nnx.scan``).
HF's ``Conv1D`` stores its weight as (in, out), which is already our ``nnx.Linear`` kernel
layout, so no transposes are needed except for an untied ``lm_head`` (HF ``nn.Linear``:
(V, d); ours: (d, V)).

    HF key (prefix ``transformer.``)         ours (pure dict path)          shape
    wte.weight                               wte/embedding                  (V, d)
    wpe.weight                               wpe/embedding                  (T, d)
    h.{i}.ln_1.weight / .bias                blocks/ln1/scale / bias        (L, d)
    h.{i}.attn.c_attn.weight / .bias         blocks/attn/qkv/kernel / bias  (L, d, 3d) / (L, 3d)
    h.{i}.attn.c_proj.weight / .bias         blocks/attn/proj/kernel / bias (L, d, d) / (L, d)
    h.{i}.ln_2.weight / .bias                blocks/ln2/scale / bias        (L, d)
    h.{i}.mlp.c_fc.weight / .bias            blocks/mlp/fc/kernel / bias    (L, d, d_ff) / (L, d_ff)
    h.{i}.mlp.c_proj.weight / .bias          blocks/mlp/proj/kernel / bias  (L, d_ff, d) / (L, d)
    ln_f.weight / .bias                      ln_f/scale / bias              (d,)
    lm_head.weight (no prefix)               tied: = wte; untied: head/kernel^T (d, V)

The fused QKV columns are [q | k | v], each split into H consecutive heads of size d/H, in
both codebases (HF ``GPT2Attention``: ``split(n_embd, dim=2)`` then ``view(..., H, d/H)``;
ours: ``jnp.split(..., 3)`` then ``reshape(B, T, H, d/H)``), so the same weights give the same
heads. HF's non-parameter attention buffers (``h.{i}.attn.bias``, the causal mask, and
``h.{i}.attn.masked_bias``, in older releases) are ignored.

GPT-2's hyper-parameters that our LM fixes: tanh-GELU (HF ``activation_function="gelu_new"``),
LayerNorm epsilon 1e-5, attention scaled by 1/sqrt(d/H), pre-LN. An HF config that differs is
rejected with :class:`UserError` rather than loaded into a model that would compute something
else.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from depthwidth.config import ModelConfig
from depthwidth.errors import UserError
from depthwidth.models.model import LM

# Per-block HF key suffix -> path in our pure param dict (below 'blocks'). Conv1D weights are
# already (in, out), so every entry maps without a transpose.
_BLOCK_MAP: dict[str, tuple[str, ...]] = {
    "ln_1.weight": ("ln1", "scale"),
    "ln_1.bias": ("ln1", "bias"),
    "attn.c_attn.weight": ("attn", "qkv", "kernel"),
    "attn.c_attn.bias": ("attn", "qkv", "bias"),
    "attn.c_proj.weight": ("attn", "proj", "kernel"),
    "attn.c_proj.bias": ("attn", "proj", "bias"),
    "ln_2.weight": ("ln2", "scale"),
    "ln_2.bias": ("ln2", "bias"),
    "mlp.c_fc.weight": ("mlp", "fc", "kernel"),
    "mlp.c_fc.bias": ("mlp", "fc", "bias"),
    "mlp.c_proj.weight": ("mlp", "proj", "kernel"),
    "mlp.c_proj.bias": ("mlp", "proj", "bias"),
}
_TOP_MAP: dict[str, tuple[str, ...]] = {
    "wte.weight": ("wte", "embedding"),
    "wpe.weight": ("wpe", "embedding"),
    "ln_f.weight": ("ln_f", "scale"),
    "ln_f.bias": ("ln_f", "bias"),
}
_PREFIX = "transformer."
_HEAD = "lm_head.weight"
# Causal-mask buffers some transformers releases put in the state dict; not parameters.
_BUFFER = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")
_BLOCK_KEY = re.compile(r"^h\.(\d+)\.(.+)$")
# HF activation names that are the tanh approximation of GELU (Hendrycks & Gimpel 2016, eq. 2).
_TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")


def _to_numpy(key: str, value: Any) -> np.ndarray:
    """A torch tensor / jax / numpy array as a float32 numpy array; UserError if not numeric."""
    if hasattr(value, "detach"):  # torch.Tensor, without importing torch
        value = value.detach().cpu()
        if value.is_floating_point():
            value = value.float()  # bf16/fp16 -> fp32: numpy has no bfloat16
        value = value.numpy()
    arr = np.asarray(value)
    if not (np.issubdtype(arr.dtype, np.floating) or arr.dtype == jnp.bfloat16):
        raise UserError(f"GPT-2 state dict: {key!r} has non-float dtype {arr.dtype}")
    return arr.astype(np.float32)


def _strip(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Drop the ``transformer.`` prefix (GPT2LMHeadModel) so GPT2Model dicts load too; drop buffers."""
    if not isinstance(state_dict, Mapping):
        raise UserError(f"GPT-2 state dict must be a mapping of name -> array, got {type(state_dict).__name__}")
    out: dict[str, Any] = {}
    for key, value in state_dict.items():
        if not isinstance(key, str):
            raise UserError(f"GPT-2 state dict: key {key!r} is not a string")
        short = key[len(_PREFIX):] if key.startswith(_PREFIX) else key
        if _BUFFER.match(short):
            continue
        if short in out:
            raise UserError(f"GPT-2 state dict: {short!r} given both with and without the {_PREFIX!r} prefix")
        out[short] = value
    return out


def _cfg_get(hf_config: Any, name: str, default: Any = None) -> Any:
    if isinstance(hf_config, Mapping):
        return hf_config.get(name, default)
    return getattr(hf_config, name, default)


def _check_hf_config(hf_config: Any) -> None:
    """Reject HF GPT-2 settings our LM does not implement (see module docstring)."""
    act = _cfg_get(hf_config, "activation_function", "gelu_new")
    if act not in _TANH_GELU:
        raise UserError(f"HF config activation_function={act!r}: our LM uses tanh-GELU ({' or '.join(_TANH_GELU)})")
    eps = _cfg_get(hf_config, "layer_norm_epsilon", 1e-5)
    if eps != 1e-5:
        raise UserError(f"HF config layer_norm_epsilon={eps}: our LM uses 1e-5")
    if not _cfg_get(hf_config, "scale_attn_weights", True):
        raise UserError("HF config scale_attn_weights=False: our LM scales attention by 1/sqrt(d/H)")
    if _cfg_get(hf_config, "scale_attn_by_inverse_layer_idx", False):
        raise UserError("HF config scale_attn_by_inverse_layer_idx=True is not implemented by our LM")


def _infer_config(sd: dict[str, Any], n_head: int) -> ModelConfig:
    """ModelConfig from array shapes: V, d from wte; T from wpe; L from the block indices; d_ff from c_fc."""
    for key in ("wte.weight", "wpe.weight", "h.0.mlp.c_fc.weight"):
        if key not in sd:
            raise UserError(f"GPT-2 state dict: missing key {_PREFIX + key!r}")
        if len(np.shape(sd[key])) != 2:
            raise UserError(f"GPT-2 state dict: {_PREFIX + key!r} must be 2-D, got shape {tuple(np.shape(sd[key]))}")
    vocab_size, d_model = np.shape(sd["wte.weight"])
    seq_len = np.shape(sd["wpe.weight"])[0]
    d_ff = np.shape(sd["h.0.mlp.c_fc.weight"])[1]
    layers = {int(m.group(1)) for k in sd if (m := _BLOCK_KEY.match(k))}
    n_layer = max(layers) + 1
    tied = _HEAD not in sd or np.array_equal(_to_numpy(_HEAD, sd[_HEAD]), _to_numpy("wte.weight", sd["wte.weight"]))
    return ModelConfig(n_layer=n_layer, d_model=int(d_model), n_head=int(n_head),
                       d_ff=0 if d_ff == 4 * d_model else int(d_ff), vocab_size=int(vocab_size),
                       seq_len=int(seq_len), tied_head=tied)


def hf_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """The HF GPT-2 state-dict keys (with ``transformer.`` prefix) and shapes for ``cfg``.

    ``lm_head.weight`` is included for both tied and untied heads, as GPT2LMHeadModel saves it.
    """
    d, f, V, T = cfg.d_model, cfg.ff_width, cfg.vocab_size, cfg.seq_len
    per_block = {"ln_1.weight": (d,), "ln_1.bias": (d,), "attn.c_attn.weight": (d, 3 * d),
                 "attn.c_attn.bias": (3 * d,), "attn.c_proj.weight": (d, d), "attn.c_proj.bias": (d,),
                 "ln_2.weight": (d,), "ln_2.bias": (d,), "mlp.c_fc.weight": (d, f), "mlp.c_fc.bias": (f,),
                 "mlp.c_proj.weight": (f, d), "mlp.c_proj.bias": (d,)}
    shapes = {_PREFIX + "wte.weight": (V, d), _PREFIX + "wpe.weight": (T, d)}
    for i in range(cfg.n_layer):
        shapes.update({f"{_PREFIX}h.{i}.{k}": s for k, s in per_block.items()})
    shapes.update({_PREFIX + "ln_f.weight": (d,), _PREFIX + "ln_f.bias": (d,), _HEAD: (V, d)})
    return shapes


def _set(tree: dict, path: tuple[str, ...], value: np.ndarray) -> None:
    for p in path[:-1]:
        tree = tree.setdefault(p, {})
    tree[path[-1]] = value


def _get(tree: Mapping, path: tuple[str, ...]) -> Any:
    for p in path:
        tree = tree[p]
    return tree


def params_from_hf(state_dict: Mapping[str, Any], cfg: ModelConfig | None = None, *,
                   n_head: int | None = None, hf_config: Any = None) -> tuple[ModelConfig, dict]:
    """Convert a HF GPT-2 state dict into ``(cfg, params)``: our pure param dict, layers stacked.

    ``state_dict``: name -> numpy array / torch tensor (any float dtype; returned as float32),
    from ``GPT2LMHeadModel`` (``transformer.``-prefixed keys plus ``lm_head.weight``) or
    ``GPT2Model`` (no prefix, no head). ``cfg``: the expected shape; when None it is inferred
    from the arrays (V, d, T, L, d_ff; the head is untied iff ``lm_head.weight`` differs from
    ``wte``), except n_head, which weights cannot reveal: give ``n_head`` or ``hf_config`` (a
    ``GPT2Config`` or its config.json dict, also checked for settings our LM does not implement).

    ``params`` matches ``nnx.to_pure_dict(nnx.state(LM(cfg), nnx.Param))``, so
    ``nnx.replace_by_pure_dict(state, params)`` then ``nnx.merge`` builds the model.

    Raises UserError on missing or unexpected keys, shape mismatches, non-float arrays, an
    unknown n_head, a post-LN cfg, or an HF config our LM cannot reproduce.
    """
    sd = _strip(state_dict)
    if hf_config is not None:
        _check_hf_config(hf_config)
        hf_heads = _cfg_get(hf_config, "n_head")
        if n_head is not None and hf_heads is not None and n_head != hf_heads:
            raise UserError(f"n_head={n_head} disagrees with the HF config's n_head={hf_heads}")
        n_head = n_head if n_head is not None else hf_heads
    if cfg is None:
        if n_head is None:
            raise UserError("GPT-2 state dict: n_head cannot be inferred from the weights; pass n_head= or hf_config=")
        cfg = _infer_config(sd, n_head)
    elif n_head is not None and n_head != cfg.n_head:
        raise UserError(f"n_head={n_head} disagrees with cfg.n_head={cfg.n_head}")
    if not cfg.pre_ln:
        raise UserError("GPT-2 is pre-LN; cfg.pre_ln=False cannot hold GPT-2 weights")
    if cfg.vocab_size <= 0:
        raise UserError("cfg.vocab_size must be set (> 0) to load GPT-2 weights")

    expected = {k[len(_PREFIX):] if k.startswith(_PREFIX) else k: s for k, s in hf_shapes(cfg).items()}
    optional = {_HEAD} if cfg.tied_head else set()  # GPT2Model dicts have no head
    missing = sorted(set(expected) - set(sd) - optional)
    unexpected = sorted(set(sd) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing {len(missing)} key(s), e.g. {', '.join(missing[:3])}")
        if unexpected:
            parts.append(f"unexpected {len(unexpected)} key(s), e.g. {', '.join(unexpected[:3])}")
        raise UserError(f"GPT-2 state dict does not match n_layer={cfg.n_layer}: " + "; ".join(parts))
    arrays = {k: _to_numpy(k, v) for k, v in sd.items()}
    for k, a in arrays.items():
        if a.shape != expected[k]:
            raise UserError(f"GPT-2 state dict: {k!r} has shape {a.shape}, expected {expected[k]} for "
                            f"L={cfg.n_layer}, d={cfg.d_model}, d_ff={cfg.ff_width}, V={cfg.vocab_size}, T={cfg.seq_len}")

    params: dict = {}
    for key, path in _TOP_MAP.items():
        _set(params, path, arrays[key])
    for suffix, path in _BLOCK_MAP.items():
        _set(params, ("blocks", *path), np.stack([arrays[f"h.{i}.{suffix}"] for i in range(cfg.n_layer)]))
    if cfg.tied_head:
        if _HEAD in arrays and not np.array_equal(arrays[_HEAD], arrays["wte.weight"]):
            raise UserError("GPT-2 state dict: lm_head.weight differs from wte.weight but cfg.tied_head=True")
    else:
        _set(params, ("head", "kernel"), np.ascontiguousarray(arrays[_HEAD].T))
    return cfg, params


def load_hf_gpt2_state_dict(state_dict: Mapping[str, Any], cfg: ModelConfig | None = None, *,
                            n_head: int | None = None, hf_config: Any = None) -> LM:
    """Build our :class:`LM` holding a HF GPT-2 state dict's weights (see :func:`params_from_hf`).

    The model's logits equal ``GPT2LMHeadModel``'s for the same weights and token ids (within
    float32 round-off; tested at atol 1e-4). Dropout is cfg.dropout (0 when inferred).
    Raises UserError as :func:`params_from_hf`.
    """
    cfg, params = params_from_hf(state_dict, cfg, n_head=n_head, hf_config=hf_config)
    # Shapes only: no random initialisation of arrays we are about to overwrite.
    abstract = nnx.eval_shape(lambda: LM(cfg, rngs=nnx.Rngs(0)))
    graphdef, state, rest = nnx.split(abstract, nnx.Param, ...)
    nnx.replace_by_pure_dict(state, jax.tree.map(jnp.asarray, params))
    return nnx.merge(graphdef, state, rest)


def to_hf_state_dict(model: LM) -> dict[str, np.ndarray]:
    """Export our LM as a ``GPT2LMHeadModel`` state dict of float32 numpy arrays (inverse of the loader).

    Keys and shapes as :func:`hf_shapes` (``lm_head.weight`` = ``wte`` when tied, the head
    kernel transposed when not). Loadable with ``GPT2LMHeadModel.load_state_dict`` after
    ``torch.from_numpy``. Raises UserError for a post-LN model, which GPT-2 cannot express.
    """
    cfg: ModelConfig = model.cfg
    if not cfg.pre_ln:
        raise UserError("only pre-LN models export to GPT-2 (cfg.pre_ln=False)")
    params = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    out: dict[str, np.ndarray] = {}
    for key, path in _TOP_MAP.items():
        out[_PREFIX + key] = np.array(_get(params, path), dtype=np.float32)
    for i in range(cfg.n_layer):
        for suffix, path in _BLOCK_MAP.items():
            out[f"{_PREFIX}h.{i}.{suffix}"] = np.array(_get(params["blocks"], path)[i], dtype=np.float32)
    out[_HEAD] = (out[_PREFIX + "wte.weight"].copy() if cfg.tied_head
                  else np.array(np.asarray(params["head"]["kernel"], dtype=np.float32).T, order="C"))
    return out


def hf_config_kwargs(cfg: ModelConfig) -> dict[str, Any]:
    """``GPT2Config(**kwargs)`` arguments describing ``cfg`` (pre-LN only; dropout 0 for eval)."""
    if not cfg.pre_ln:
        raise UserError("only pre-LN models export to GPT-2 (cfg.pre_ln=False)")
    return dict(vocab_size=cfg.vocab_size, n_positions=cfg.seq_len, n_embd=cfg.d_model, n_layer=cfg.n_layer,
                n_head=cfg.n_head, n_inner=cfg.ff_width, activation_function="gelu_new",
                resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                tie_word_embeddings=cfg.tied_head, bos_token_id=None, eos_token_id=None)
