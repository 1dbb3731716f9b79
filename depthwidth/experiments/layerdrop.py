"""Layer deletion on a trained LM, and the same number of parameters taken from the MLP width.

Issue 11 item 3 (README, "exp layerdrop"). Gromov et al. 2024 ("The Unreasonable Ineffectiveness
of the Deeper Layers", arXiv 2403.17887) and Men et al. 2024 (ShortGPT, arXiv 2403.03853) delete
contiguous runs of layers from trained LLMs and find the late ones (all but the very last) cheap
to remove, the early ones expensive. Here, on a char-level model of this project:

* **layers**: delete the k contiguous blocks ``start .. start+k-1`` (0-based; block 0 is the
  first after the embedding) for every start, and evaluate the test loss. The blocks'
  parameters are stacked on the leading ``layers`` axis (:mod:`depthwidth.models.model`), so the
  deletion is a slice of that axis, merged into an LM built with ``n_layer = L - k``. That LM's
  init-time std of the output projections (0.02/sqrt(2L)) differs, but every weight is loaded,
  so the init does not enter.
* **mlp_units** (the control): remove the same number of parameters spread over all L blocks
  as hidden units of every block's MLP. A hidden unit j of a block holds its fc column (d), fc
  bias (1) and proj row (d): 2d + 1 parameters; k blocks hold k(12d^2 + 13d)
  (:func:`depthwidth.theory.accounting.stack_n`). Matching the counts gives
  ``m = round(k·d(12d + 13) / (L(2d + 1)))`` units removed per block (:func:`control_units`),
  equal up to the rounding of m (at most L(2d+1)/2 parameters off); as a fraction of the MLP
  width f = 4d that is m/f ≈ (3/2)(k/L): the MLP holds 2/3 of a block, so taking a fraction k/L
  of the stack from it alone takes 3/2 of that fraction of its units. The units are chosen
  either uniformly at random per block (``choice = "random"``, a seed) or as the m of smallest
  ``||fc[:, j]|| · ||proj[j, :]||`` per block (``choice = "norm"``: magnitude pruning, the
  product because the unit's contribution scales with both). The slimmer LM is built with
  ``d_ff = f - m``.
* **none**: the full model, which must reproduce the training record's test loss exactly.

The test loss is the training record's: :func:`depthwidth.models.engine.evaluate` with the
run's config (batch size, T, compute dtype, mesh) over ``train.test_sequences`` test windows,
with the same per-chunk losses, from an engine that compiles the eval step only.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np

from depthwidth import records
from depthwidth.data.prepare import prepared_dir_for
from depthwidth.data.tokenfiles import open_prepared
from depthwidth.errors import UserError
from depthwidth.experiments import kinds
from depthwidth.theory.accounting import stack_n

KIND = "layerdrop"
CHOICES = ("random", "norm")


def check_ks(ks: list[int] | tuple[int, ...], n_layer: int) -> tuple[int, ...]:
    """``ks`` sorted and unique; UserError unless every k is in 1 .. n_layer - 1 (deleting all
    L layers leaves no stack; k = 0 is the full model, which is always evaluated)."""
    if not ks:
        raise UserError("--k needs at least one run length")
    bad = [k for k in ks if not 1 <= k <= n_layer - 1]
    if bad:
        raise UserError(f"--k {bad[0]}: the run length must be in 1..{n_layer - 1} (the model has L = {n_layer} layers)")
    return tuple(sorted(set(ks)))


def control_units(k: int, n_layer: int, d_model: int, d_ff: int) -> int:
    """Hidden units m to remove from every block's MLP so that L·m·(2d+1) ≈ k(12d²+13d) (module
    doc; the nearest integer). Raises UserError when m would reach the MLP width d_ff."""
    per_layer = stack_n(1, d_model, d_ff) - 2 * d_model  # one block: 4d² + 2d·f + f + 9d
    m = round(k * per_layer / (n_layer * (2 * d_model + 1)))
    if m >= d_ff:
        raise UserError(f"k = {k}: the width control would remove {m} of the {d_ff} MLP units of every layer")
    return m


def removed_params(deletion: dict[str, Any], n_layer: int, d_model: int, d_ff: int) -> int:
    """Stack parameters (count) a deletion removes: ``stack_n`` before minus after (exact)."""
    full = stack_n(n_layer, d_model, d_ff)
    if deletion["what"] == "layers":
        return full - stack_n(n_layer - deletion["k"], d_model, d_ff)
    if deletion["what"] == "mlp_units":
        return full - stack_n(n_layer, d_model, d_ff - deletion["units_per_layer"])
    return 0


def deletions(ks: tuple[int, ...], n_layer: int, d_model: int, d_ff: int, *, seeds: int,
              norm: bool = True) -> list[dict[str, Any]]:
    """Every unit of work, in run order: the full model, then per k every contiguous run
    (start 0 .. L-k), then per k the width control (``seeds`` random choices, and the
    smallest-norm one when ``norm``)."""
    out: list[dict[str, Any]] = [{"what": "none", "k": 0}]
    out += [{"what": "layers", "k": k, "start": s} for k in ks for s in range(n_layer - k + 1)]
    for k in ks:
        m = control_units(k, n_layer, d_model, d_ff)
        out += [{"what": "mlp_units", "k": k, "units_per_layer": m, "choice": "random", "seed": s}
                for s in range(seeds)]
        if norm:
            out.append({"what": "mlp_units", "k": k, "units_per_layer": m, "choice": "norm"})
    return out


# ------------------------------------------------------------------------------ the surgery
# ``params``: the LM's parameters as a pure dict (nnx.to_pure_dict of its nnx.Param state):
# ``params["blocks"]`` holds every block parameter with the L blocks on the leading axis.


def drop_layers(params: dict, start: int, k: int) -> dict:
    """``params`` without blocks ``start .. start+k-1``: every ``blocks`` leaf (L, ...) ->
    (L-k, ...); the rest shared. Raises UserError when the run does not fit in the L blocks."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    L = int(jax.tree.leaves(params["blocks"])[0].shape[0])
    if not (k >= 0 and 0 <= start and start + k <= L):
        raise UserError(f"cannot delete layers {start}..{start + k - 1} of a {L}-layer model")
    keep = np.r_[0:start, start + k:L]
    return {**params, "blocks": jax.tree.map(lambda a: a[keep], params["blocks"])}


def zero_block_outputs(params: dict, i: int) -> dict:
    """``params`` with block i's two residual output projections (attn.proj, mlp.proj: kernels
    and biases) set to zero. Under pre-LN, x + attn(ln1(x)) and x + mlp(ln2(x)) are then x, so
    block i is the identity: the same function as deleting it, reached by another route (the
    independent check of :func:`drop_layers`). Not so under post-LN (the LNs still act)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    b = params["blocks"]

    def zero(p):
        return {"kernel": jnp.asarray(p["kernel"]).at[i].set(0.0), "bias": jnp.asarray(p["bias"]).at[i].set(0.0)}

    attn = {**b["attn"], "proj": zero(b["attn"]["proj"])}
    mlp = {**b["mlp"], "proj": zero(b["mlp"]["proj"])}
    return {**params, "blocks": {**b, "attn": attn, "mlp": mlp}}


def unit_scores(params: dict) -> np.ndarray:
    """(L, f) float64: ``||fc.kernel[l][:, j]|| · ||proj.kernel[l][j, :]||`` of every MLP hidden
    unit j of every block l (fc kernel (L, d, f), proj kernel (L, f, d))."""
    fc = np.asarray(params["blocks"]["mlp"]["fc"]["kernel"], dtype=np.float64)
    proj = np.asarray(params["blocks"]["mlp"]["proj"]["kernel"], dtype=np.float64)
    return np.linalg.norm(fc, axis=1) * np.linalg.norm(proj, axis=2)


def units_to_keep(params: dict, m: int, choice: str, seed: int = 0) -> np.ndarray:
    """(L, f - m) int: the hidden units each block keeps, ascending, after removing m of its f
    (``choice`` "random": uniformly without replacement from ``numpy.random.default_rng(seed)``,
    independently per block; "norm": the m of smallest :func:`unit_scores`)."""
    scores = unit_scores(params)
    L, f = scores.shape
    if choice == "random":
        rng = np.random.default_rng(seed)
        drop = np.stack([rng.choice(f, size=m, replace=False) for _ in range(L)])
    elif choice == "norm":
        drop = np.argsort(scores, axis=1, kind="stable")[:, :m]
    else:
        raise UserError(f"unknown unit choice {choice!r} (expected one of {', '.join(CHOICES)})")
    mask = np.ones((L, f), dtype=bool)
    np.put_along_axis(mask, drop, False, axis=1)
    return np.stack([np.flatnonzero(row) for row in mask])


def drop_mlp_units(params: dict, keep: np.ndarray) -> dict:
    """``params`` with every block's MLP cut to the hidden units ``keep`` (L, f'): fc kernel
    (L, d, f) -> (L, d, f'), fc bias (L, f) -> (L, f'), proj kernel (L, f, d) -> (L, f', d); the
    proj bias (L, d) stays (it is not per unit)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    mlp = params["blocks"]["mlp"]
    idx = jnp.asarray(keep)
    fc = {"kernel": jnp.take_along_axis(jnp.asarray(mlp["fc"]["kernel"]), idx[:, None, :], axis=2),
          "bias": jnp.take_along_axis(jnp.asarray(mlp["fc"]["bias"]), idx, axis=1)}
    proj = {"kernel": jnp.take_along_axis(jnp.asarray(mlp["proj"]["kernel"]), idx[:, :, None], axis=1),
            "bias": mlp["proj"]["bias"]}
    return {**params, "blocks": {**params["blocks"], "mlp": {"fc": fc, "proj": proj}}}


def apply_deletion(cfg, params: dict, deletion: dict[str, Any]):
    """(config, params) of the model after ``deletion``: the run's config with ``n_layer`` (layers)
    or ``d_ff`` (mlp_units) changed, and the sliced parameters."""
    m = cfg.model
    if deletion["what"] == "none":
        return cfg, params
    if deletion["what"] == "layers":
        new = dataclasses.replace(m, n_layer=m.n_layer - deletion["k"])
        return dataclasses.replace(cfg, model=new), drop_layers(params, deletion["start"], deletion["k"])
    if deletion["what"] == "mlp_units":
        keep = units_to_keep(params, deletion["units_per_layer"], deletion["choice"], deletion.get("seed", 0))
        new = dataclasses.replace(m, d_ff=m.ff_width - deletion["units_per_layer"])
        return dataclasses.replace(cfg, model=new), drop_mlp_units(params, keep)
    raise UserError(f"unknown deletion {deletion['what']!r}")


# ------------------------------------------------------------------------------ evaluation


class Evaluator:
    """The test loss of parameter sets of one trained run, as its record computed it.

    ``cfg``: the run's config with the vocabulary resolved (:func:`depthwidth.models.train.load_run`);
    ``test``: the run's test split (uint16 token ids). One eval-only engine per model shape
    ``(n_layer, d_ff)``, built on first use and kept (compiling is most of the cost).
    """

    def __init__(self, cfg, test: np.ndarray):
        self.cfg, self.test, self._engines = cfg, test, {}

    def engine(self, cfg):
        # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
        from depthwidth.models.engine import build_engine

        key = (cfg.model.n_layer, cfg.model.ff_width)
        if key not in self._engines:
            self._engines[key] = build_engine(cfg, verbose=False, train=False)
        return self._engines[key]

    def loss(self, cfg, params: dict) -> dict[str, Any]:
        """{"test_loss" (nats/token), "test_sequences", "test_loss_chunks", "compile_s", "wall_s"}
        of ``params`` (a pure dict for ``cfg``'s shape) on the run's test split."""
        # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
        import jax

        # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
        from depthwidth.models.engine import EVAL_CHUNKS, evaluate

        t0 = time.perf_counter()
        fresh = (cfg.model.n_layer, cfg.model.ff_width) not in self._engines
        eng = self.engine(cfg)
        placed = jax.device_put(params, eng.state_sharding["params"])
        loss, n, chunks = evaluate(eng, placed, self.test, cfg.train.test_sequences, chunks=EVAL_CHUNKS)
        return {"test_loss": loss, "test_sequences": n, "test_loss_chunks": chunks,
                "compile_s": eng.compile_s if fresh else 0.0, "wall_s": time.perf_counter() - t0}


def pure_params(model) -> dict:
    """The pure-dict parameters (what the engine's steps take) of an nnx LM."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from flax import nnx

    return nnx.to_pure_dict(nnx.state(model, nnx.Param))


def test_split(cfg, data_dir=None) -> np.ndarray:
    """The run's test split (token ids), from the prepared data its config names."""
    return open_prepared(prepared_dir_for(cfg.data, data_dir)).test


def spec(train_rec: dict[str, Any], deletion: dict[str, Any]) -> dict[str, Any]:
    """A unit's spec (what its record id hashes): the trained run, the deletion, the eval settings."""
    c = train_rec["config"]
    return {"run_id": train_rec["run_id"], "deletion": deletion,
            "eval": {"split": "test", "sequences": c["train"]["test_sequences"],
                     "batch_size": c["train"]["batch_size"], "seq_len": c["model"]["seq_len"],
                     "compute_dtype": c["train"]["compute_dtype"]}}


def measure(train_rec: dict[str, Any], run_dir, results, units: list[dict[str, Any]], *, data_dir=None,
            progress=None) -> int:
    """Evaluate every deletion of ``units`` whose record is not yet under ``results`` and store
    one record of kind ``layerdrop`` each (:mod:`depthwidth.experiments.kinds`); return how many
    were evaluated (0: nothing to do, and the model is not even loaded).

    ``train_rec``: the trained run's record (its ``test_loss`` is the baseline of every delta);
    ``run_dir``: its directory (weights kept); ``progress(done, total, unit_record)``: called
    after each unit. Raises UserError when the weights were not kept, or when the 0-layer
    deletion does not reproduce the record's test loss (then every delta would be off).
    """
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    from depthwidth.models.train import load_run, provenance

    have = kinds.done(results, KIND)
    todo = [u for u in units if kinds.unit_id(KIND, spec(train_rec, u)) not in have]
    if not todo:
        return 0
    cfg, model = load_run(run_dir)
    params, ev, prov = pure_params(model), Evaluator(cfg, test_split(cfg, data_dir)), provenance()
    m = cfg.model
    for i, u in enumerate(todo):
        dcfg, dparams = apply_deletion(cfg, params, u)
        got = ev.loss(dcfg, dparams)
        # The full model must give the record's loss (bit for bit on the machine that trained
        # it; a relative 1e-6 allows another CPU's rounding), or every delta would be off.
        if u["what"] == "none" and abs(got["test_loss"] - train_rec["test_loss"]) > 1e-6 * train_rec["test_loss"]:
            raise UserError(f"the full model's test loss {got['test_loss']!r} is not the record's "
                            f"{train_rec['test_loss']!r}: the evaluation differs from training's")
        rec = kinds.write(results, KIND, spec(train_rec, u), provenance=prov,
                          n_layer=dcfg.model.n_layer, d_model=m.d_model, n_head=m.n_head, vocab_size=m.vocab_size,
                          seq_len=m.seq_len, seed=cfg.train.seed, device=_device(), **got,
                          params=records.params_of(dcfg.model.n_layer, m.d_model, n_head=m.n_head,
                                                   vocab_size=m.vocab_size, seq_len=m.seq_len,
                                                   tied_head=m.tied_head, d_ff=dcfg.model.ff_width),
                          d_ff=dcfg.model.ff_width, trained_n_layer=m.n_layer, trained_d_ff=m.ff_width,
                          base_test_loss=train_rec["test_loss"], delta_test_loss=got["test_loss"] - train_rec["test_loss"],
                          removed_params=removed_params(u, m.n_layer, m.d_model, m.ff_width),
                          stack_params=stack_n(m.n_layer, m.d_model, m.ff_width))
        if progress:
            progress(i + 1, len(todo), rec)
    return len(todo)


def _device() -> str:
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    return f"{jax.devices()[0].platform} x{jax.device_count()}"
