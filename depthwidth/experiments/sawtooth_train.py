"""The trained sawtooth: does gradient descent find the deep ReLU net that the theory says exists?

Target: g^k on [0, 1], the k-fold hat map (g(x) = 2x on [0, 1/2], 2 − 2x above; 2^k linear
pieces, amplitude 1; Telgarsky 2016 §3). Architectures (scalar in, scalar out,
ReLU after every hidden layer), ``arch``:

* ``deep``: k hidden layers of width 2, the shape of the exact construction
  (:func:`depthwidth.theory.sawtooth.sawtooth_layers`), 6k + 1 parameters;
* ``shallow_same``: one hidden layer with the same parameter count, u = 2k units
  (3u + 1 = 6k + 1); at most 2k + 1 pieces, fewer than 2^k for k >= 3, so its sup error is
  at least 1/2 whatever training does (:func:`depthwidth.theory.sawtooth.sup_error_lower_bound`);
* ``shallow_exact``: one hidden layer of 2^k units, the size at which the theory's one-layer
  construction (:func:`~depthwidth.theory.sawtooth.shallow_sawtooth_layers`) is exact;

and two over-parameterised controls, which separate "gradient descent cannot fit g^k with these
settings at all" from "it does not find the minimal-size solutions":

* ``shallow_wide``: one hidden layer of min(8·2^k, max(512, 2·2^k)) units
  (:data:`SHALLOW_WIDE_FACTOR`, :data:`SHALLOW_WIDE_CAP`): 8× the exact size up to k = 6, then
  capped at 512 (4× at k = 7, 2× at k = 8; never below 2·2^k, so 2^(k+1) at k = 9, 10), because
  training costs ∝ units and the exact piece count ∝ units² rational operations (2048 units at
  k = 8 would take about 2.5 single-core minutes per net);
* ``deep_wide``: k hidden layers of width 8 (:data:`DEEP_WIDE_WIDTH`, 4× the construction's
  width), 72k − 47 parameters: does extra width per layer let gradient descent use the depth?

plus the two constructions themselves as reference rows (``deep_construction``,
``shallow_construction``: zero error, 2^k pieces, nothing trained).

Training (:func:`train`): full batch on the n + 1 grid points i/n (n = ``grid``, a multiple of
2^k so every kink of g^k is a sample), mean squared error, Adam (optax) with a cosine decay of
the learning rate from ``lr`` to 0 over ``steps`` steps, float32, one XLA:CPU thread
(:mod:`depthwidth.hostcpu`). Initialisation (:func:`init_layers`): weights N(0, 2/fan_in) (He et
al. 2015), biases U(−1, 1)/fan_in; not zero biases, because a ReLU net without biases is
positively homogeneous and hence linear on [0, 1] (one piece).

Measurement (:func:`measure`): the trained float32 weights are read as the exact rationals they
store (``Fraction(float(w))``), so the piece count (:func:`~depthwidth.theory.sawtooth.
count_linear_pieces`) and the sup error (:func:`~depthwidth.theory.sawtooth.sup_error`) are
exact for the trained network itself; the RMS error is on the dense grid of ``eval_grid`` + 1
points in float64. The same is measured at initialisation.
"""

from __future__ import annotations

import functools
import math
import time
from fractions import Fraction

import numpy as np

from depthwidth import hostcpu
from depthwidth.errors import UserError

# the unit's spec, also re-exported: callers (pipeline.exp_sawtooth, tests) use st.ARCHS, st.SawtoothSpec
from depthwidth.experiments.sawtooth_spec import (  # noqa: F401
    ARCHS,
    CONSTRUCTIONS,
    DEEP_WIDE_WIDTH,
    DEEP_WIDTH,
    EVAL_GRID,
    MAX_K,
    SHALLOW_WIDE_CAP,
    SHALLOW_WIDE_FACTOR,
    SawtoothSpec,
    check_depth,
    hidden_widths,
)


def init_layers(hidden: list[int], seed: int):
    """[(W (out, in), b (out,)), ...] as float32 jax arrays for 1 → hidden → 1.

    W ~ N(0, 2/fan_in) (He et al. 2015, for ReLU); b ~ U(−1, 1)/fan_in. With x in [0, 1] a
    first-layer unit's kink −b/w then falls inside the data range with a fair chance; zero
    biases would make the net linear on [0, 1] (module doc)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    widths = [1, *hidden, 1]
    keys = jax.random.split(jax.random.PRNGKey(seed), 2 * (len(widths) - 1))
    out = []
    for i, (a, b) in enumerate(zip(widths[:-1], widths[1:])):
        W = jax.random.normal(keys[2 * i], (b, a)) * math.sqrt(2.0 / a)
        out.append((W, jax.random.uniform(keys[2 * i + 1], (b,), minval=-1.0, maxval=1.0) / a))
    return out


def forward(layers, x):
    """The MLP in jax (or numpy): x (n,) → (n,); ReLU after every layer but the last."""
    h = x[:, None]
    for i, (W, b) in enumerate(layers):
        h = h @ W.T + b
        if i < len(layers) - 1:
            h = h * (h > 0)
    return h[:, 0]


def target(x: np.ndarray, k: int) -> np.ndarray:
    """g^k on an array (float64): the hat map 1 − |2x − 1| applied k times."""
    y = np.asarray(x, np.float64)
    for _ in range(k):
        y = 1.0 - np.abs(2.0 * y - 1.0)
    return y


def _fit(layers, x, y, steps: int, lr: float):
    """Full-batch Adam with cosine lr decay for ``steps`` steps (:func:`_compiled_fit`);
    returns (layers, losses (steps,))."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    layers, losses = _compiled_fit(steps)(layers, x, y, jnp.float32(lr))
    return layers, np.asarray(losses)


@functools.cache
def _compiled_fit(steps: int):
    """One jitted ``lax.scan`` of ``steps`` Adam steps, shared by every unit with the same steps
    (jax then compiles once per parameter shape, not once per seed)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import optax

    def fit(p, x, y, lr):
        opt = optax.adam(optax.cosine_decay_schedule(lr, steps))

        def step(carry, _):
            p, s = carry
            val, g = jax.value_and_grad(lambda q: jnp.mean((forward(q, x) - y) ** 2))(p)
            upd, s = opt.update(g, s, p)
            return (optax.apply_updates(p, upd), s), val

        (p, _), losses = jax.lax.scan(step, (p, opt.init(p)), None, length=steps)
        return p, losses

    return jax.jit(fit)


def to_numpy(layers) -> list[tuple[np.ndarray, np.ndarray]]:
    """float32 jax layers → float32 numpy (W, b) pairs."""
    return [(np.asarray(W, np.float32), np.asarray(b, np.float32)) for W, b in layers]


def measure(layers, k: int, eval_grid: int = EVAL_GRID) -> dict:
    """Pieces and errors of a network against g^k on [0, 1] (module doc).

    ``layers``: (W, b) pairs of float or Fraction entries. Returns ``pieces`` (exact count),
    ``sup_error`` (exact, as a float), ``sup_error_bound`` (1/2 if pieces < 2^k, else 0),
    ``rms_error`` and ``max_error_grid`` (float64 on eval_grid + 1 points)."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory import sawtooth as st

    exact = [([[_exact(w) for w in row] for row in np.asarray(W, object)], [_exact(v) for v in np.asarray(b, object)])
             for W, b in layers]
    pieces = st.linear_pieces(exact, 0, 1)
    x = np.linspace(0.0, 1.0, eval_grid + 1)
    f = forward([(np.asarray(W, np.float64), np.asarray(b, np.float64)) for W, b in layers], x)
    err = f - target(x, k)
    return {"pieces": len(pieces), "sup_error": float(st.sup_error(exact, k, pieces)),
            "sup_error_bound": float(st.sup_error_lower_bound(len(pieces), k)),
            "rms_error": float(np.sqrt(np.mean(err**2))), "max_error_grid": float(np.max(np.abs(err)))}


def _exact(w) -> Fraction:
    """The rational a stored number is: a float32/float64 weight exactly (every float is a dyadic
    rational), a Fraction as it is."""
    return w if isinstance(w, Fraction) else Fraction(float(w))


def train(spec: SawtoothSpec) -> dict:
    """Train one unit (module doc) and measure it before and after; a dict of the record's fields:
    the trained measurement (:func:`measure`), ``init`` (the same at step 0), ``loss_first`` /
    ``loss_last`` (MSE of the first and last step), ``finite``, ``weights`` ([[W, b], ...] as
    float32 values in JSON lists: exact), ``params``, ``wall_s``."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp


    hostcpu.pin_one_core()
    t0 = time.perf_counter()
    layers = init_layers(hidden_widths(spec.k, spec.arch), spec.seed)
    x = np.linspace(0.0, 1.0, spec.grid + 1)
    init = to_numpy(layers)
    trained, losses = _fit(layers, jnp.asarray(x, jnp.float32), jnp.asarray(target(x, spec.k), jnp.float32),
                           spec.steps, spec.lr)
    trained = to_numpy(trained)
    finite = bool(np.isfinite(losses).all() and all(np.isfinite(W).all() and np.isfinite(b).all() for W, b in trained))
    if not finite:  # diverged: measure the initial weights, say so in the record
        trained = init
    wall = time.perf_counter() - t0
    return {**measure(trained, spec.k, spec.eval_grid), "init": measure(init, spec.k, spec.eval_grid),
            "loss_first": float(losses[0]), "loss_last": float(losses[-1]), "finite": finite,
            "weights": [[W.tolist(), b.tolist()] for W, b in trained], "params": n_params(trained),
            "wall_s": wall, "measure_s": time.perf_counter() - t0 - wall}


def n_params(layers) -> int:
    """Number of weights and biases (Σ out·in + out)."""
    return int(sum(np.size(W) + np.size(b) for W, b in layers))


def construction(k: int, arch: str, eval_grid: int = EVAL_GRID) -> dict:
    """The reference rows: the exact construction ``arch`` (:data:`CONSTRUCTIONS`) measured as a
    trained net is (pieces 2^k, sup error 0). Raises UserError on a bad k or arch."""
    # loaded when the command runs: building the parser (--help, query) stays < 0.5 s
    from depthwidth.theory import sawtooth as st

    k = check_depth(k)
    if arch not in CONSTRUCTIONS:
        raise UserError(f"construction must be one of {', '.join(CONSTRUCTIONS)}, got {arch!r}")
    layers = st.sawtooth_layers(k) if arch == "deep_construction" else st.shallow_sawtooth_layers(k)
    layers = [(np.array(W, object), np.array(b, object)) for W, b in layers]
    return {**measure(layers, k, eval_grid), "params": n_params(layers), "finite": True}
