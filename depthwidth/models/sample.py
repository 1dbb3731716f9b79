"""``depthwidth sample``: text from a kept run (or GPT-2 weights), through the KV-cache decoder.

The model and its tokenizer come from one of two sources:

* a kept training run (``--set train.keep_weights=true``): :func:`depthwidth.models.train.load_run`
  gives the model, and the run's own prepared data (its corpus and tokenizer, prepared again
  from the corpus if the cache lacks it) gives the tokenizer;
* a Hugging Face GPT-2 directory (``save_pretrained``: config, weights, tokenizer files), read
  with ``transformers`` (an optional peer: ``pip install '.[peers]'`` and torch) and converted by
  :mod:`depthwidth.models.gpt2`.

The text is the prompt followed by ``max_new_tokens`` new tokens (:func:`depthwidth.models.
decode.generate`); tokens/s counts the new tokens over the prefill and the steps, compilation
excluded.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from depthwidth.errors import UserError


@dataclass
class Source:
    """A loaded model with its text codec: ``encode(str) -> list[int]``, ``decode(ids) -> str``,
    and ``name`` (what was loaded, for the report)."""

    model: Any
    encode: Any
    decode: Any
    name: str


def from_run(run_dir: str | Path, data_dir: str | Path | None = None) -> Source:
    """The model of a kept run and its data's tokenizer. Raises UserError as ``load_run`` (no
    record, not finished, weights not kept) and when the run's data cannot be found."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.data.prepare import prepared_dir_for
    from depthwidth.data.tokenfiles import open_prepared
    from depthwidth.models.train import load_run

    cfg, model = load_run(run_dir)
    prepared = open_prepared(prepared_dir_for(cfg.data, data_dir))
    if prepared.vocab_size > cfg.model.vocab_size:
        raise UserError(f"{run_dir}: its data now has {prepared.vocab_size} tokens, the model {cfg.model.vocab_size}")
    return Source(model, prepared.encode, prepared.decode, f"run {Path(run_dir).name}")


def from_gpt2(directory: str | Path) -> Source:
    """A Hugging Face GPT-2 directory (``GPT2LMHeadModel.save_pretrained`` + its tokenizer).
    Raises UserError when transformers/torch are missing or the directory cannot be read."""
    try:
        # optional peers (pip install '.[peers]' and torch): loaded only for --gpt2
        import transformers
    except ImportError:
        raise UserError("--gpt2 needs transformers and torch (pip install '.[peers]' torch)") from None
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.gpt2 import load_hf_gpt2_state_dict

    path = Path(directory)
    if not path.is_dir():
        raise UserError(f"--gpt2 {directory}: not a directory")
    try:
        hf = transformers.GPT2LMHeadModel.from_pretrained(path)
        tok = transformers.AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise UserError(f"--gpt2 {directory}: {str(e).strip().splitlines()[0]}") from None
    model = load_hf_gpt2_state_dict(hf.state_dict(), hf_config=hf.config)
    return Source(model, lambda text: tok.encode(text), lambda ids: tok.decode(list(ids)), f"GPT-2 {path.name}")


DEFAULT_NEW_TOKENS = 100


def sample(source: Source, prompt: str, *, max_new_tokens: int | None, temperature: float, top_k: int | None,
           seed: int) -> dict[str, Any]:
    """Generate from ``prompt`` (one sequence); ``max_new_tokens`` None: :data:`DEFAULT_NEW_TOKENS`,
    or fewer where the model's context (cfg.seq_len) ends sooner. Returns ``text`` (prompt + continuation),
    ``prompt_tokens``, ``new_tokens``, ``tokens_per_s`` (new tokens / (prefill + steps) seconds),
    ``prefill_s``, ``step_s_total``, ``step_ms_median``, ``compile_s`` and the settings. Raises UserError for an
    empty prompt, a character the vocabulary lacks and the checks of ``generate``."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    # numpy: ~0.1 s at import; kept off the modules that do not need it
    import numpy as np

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.decode import generate

    ids = source.encode(prompt)
    if not ids:
        raise UserError("--prompt encodes to no tokens: give at least one character")
    if max_new_tokens is None:
        max_new_tokens = min(DEFAULT_NEW_TOKENS, max(1, source.model.cfg.seq_len - len(ids)))
    gen = generate(source.model, np.asarray([ids]), max_new_tokens, temperature=temperature, top_k=top_k, seed=seed)
    return {"source": source.name, "text": source.decode(gen.tokens[0]), "prompt_tokens": len(ids),
            "new_tokens": gen.new_tokens, "tokens_per_s": gen.tokens_per_s(), "prefill_s": gen.prefill_s, "step_s_total": sum(gen.step_s),
            "step_ms_median": 1e3 * statistics.median(gen.step_s) if gen.step_s else None,
            "compile_s": gen.compile_s, "temperature": temperature, "top_k": top_k, "seed": seed,
            "device": str(jax.devices()[0].device_kind)}
