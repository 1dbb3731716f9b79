"""Separation rank of *trained* tiny analysed networks: train on real text, round, measure exactly.

Issue 12's second half: does a short training run use the capacity the bound allows, i.e. is
the grid-tensor rank of a trained network (:mod:`depthwidth.theory.seprank`) as high as the
generic (random-weight) rank at the same shape, or below it?

The network trained is exactly the analysed one of Levine et al. 2020 (arXiv 2006.12467, §3
and App. B): L layers of H-head self-attention with softmax, LayerNorm and
feed-forward removed, ``y_i = [x_i +] Σ_h W_O Σ_j <W_Q x_i, W_K x_j> W_V x_j`` (the function
:func:`depthwidth.theory.seprank.evaluate` computes; :func:`forward` is the same in jax). Around
it, only what a language model needs: a character embedding (V × d_x) into the N input
positions and a linear read-out (d_x → V, with bias) of the output at one position.

Task: character-level next-character prediction on a real corpus (default Jane Austen's novels,
``austen.txt`` in ``$DEPTHWIDTH_DATA``, sha256-checked). A window holds the N most recent characters with the
*latest at position 0*: the analysed network has no positional encoding, so it is
permutation-equivariant, and reading out at position 0 with the latest character there is
reading out at the last position up to a relabelling; position 0 is also the position whose
coordinate 0 the rank measures. Train/held-out text: the corpus's default 90/5/5 split
(:func:`depthwidth.data.splits.split_ranges`), train and val parts. Adam (optax) with global-
norm clipping, seeded windows, one XLA:CPU thread (:mod:`depthwidth.hostcpu`): deterministic.

Rank of a trained network. The grid tensor needs exact arithmetic, so the trained float weights
are rounded to a grid of multiples of 1/g (``denominator`` g; the table uses g = 64 and g = 256
to see whether the rank is stable under the rounding) and measured on distinct integer
templates, exactly modulo two primes (:func:`depthwidth.theory.seprank.grid_rank`; rational
weights are exact there). The
rounded network is an approximation of the float one: a rank of the rounded weights is the rank
of a nearby network, not a proof about the float network (rank is lower semicontinuous, so the
float network's rank is at least that of any network close enough to it -- but "close enough"
is not certified here). The float64 SVD rank of the float weights' grid is reported as the
cross-check. The embedding and read-out are not part of the measured function f.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from depthwidth import hostcpu, storage
from depthwidth.data import corpora, splits
from depthwidth.errors import UserError
from depthwidth.theory import seprank
from depthwidth.theory.seprank import MAX_TEMPLATES

DENOMINATORS = (64, 256)  # rounding grids 1/64 and 1/256 (the first is the headline)


@dataclass(frozen=True)
class TrainSpec:
    """One short training run. Sizes: ``n_layer`` L, ``d_model`` d_x, ``n_head`` H (divides d_x),
    ``n_positions`` N (context characters); ``steps`` Adam steps of ``batch_size`` windows at
    learning rate ``lr``; ``init_scale``: attention weights start N(0, (init_scale/√d_x)²)."""

    n_layer: int
    d_model: int
    n_head: int = 1
    residual: bool = False
    n_positions: int = 4
    steps: int = 400
    batch_size: int = 128
    lr: float = 1e-2
    init_scale: float = 1.0
    seed: int = 0
    corpus: str = "austen"
    eval_windows: int = 20_000

    def __post_init__(self):
        for name in ("n_layer", "d_model", "n_head", "n_positions", "steps", "batch_size", "eval_windows"):
            if getattr(self, name) < 1:
                raise UserError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.n_head:
            raise UserError(f"--heads {self.n_head} must divide --width {self.d_model}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise UserError(f"lr must be a positive number, got {self.lr}")


@dataclass(frozen=True)
class CharText:
    """A corpus as character ids: ``train``/``heldout`` int32 arrays, ``vocab`` the sorted
    distinct characters of the whole corpus (id = index)."""

    train: np.ndarray
    heldout: np.ndarray
    vocab: tuple


def load_chars(corpus: str = "austen", data_dir=None) -> CharText:
    """The corpus (sha256-checked, :func:`depthwidth.data.corpora.locate`) as character ids, split
    by :func:`depthwidth.data.splits.split_ranges` (train, val). Raises UserError when the corpus
    is unknown or missing."""
    text = splits.read_text(corpora.locate(corpus, data_dir))
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    uniq, ids = np.unique(codes, return_inverse=True)
    (a, b), (_, c), _ = splits.split_ranges(text)
    ids = ids.astype(np.int32)
    return CharText(ids[a:b], ids[b:c], tuple(chr(int(u)) for u in uniq))


def windows(ids: np.ndarray, starts: np.ndarray, n_positions: int) -> tuple[np.ndarray, np.ndarray]:
    """Contexts (B, N) with the latest character at position 0 (module doc) and targets (B,):
    window at t holds ids[t], ids[t-1], ..., ids[t-N+1] and predicts ids[t+1]."""
    ctx = np.stack([ids[starts - k] for k in range(n_positions)], axis=1)
    return ctx, ids[starts + 1]


def unigram_loss(train: np.ndarray, targets: np.ndarray, vocab_size: int) -> float:
    """Cross-entropy (nats/char) on ``targets`` of the train unigram distribution (add-one
    smoothed): the loss of the read-out bias alone, the baseline a trained network must beat."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[targets].mean())


def init_params(spec: TrainSpec, vocab_size: int):
    """Parameters: ``emb`` (V, d_x) ~ N(0, 1); ``layers`` [l][h] = (W_Q, W_K, W_V: (d_a, d_x);
    W_O: (d_x, d_a)) ~ N(0, (init_scale/√d_x)²); read-out ``w_out`` (d_x, V) = 0, ``b_out`` (V,)
    = 0 (the model starts at the uniform guess). jax arrays, float32, from ``spec.seed``."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    d, da = spec.d_model, spec.d_model // spec.n_head
    keys = iter(jax.random.split(jax.random.PRNGKey(spec.seed), 1 + 4 * spec.n_layer * spec.n_head))
    sd = spec.init_scale / math.sqrt(d)

    def w(shape):
        return sd * jax.random.normal(next(keys), shape)

    layers = [[(w((da, d)), w((da, d)), w((da, d)), w((d, da))) for _ in range(spec.n_head)]
              for _ in range(spec.n_layer)]
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    return {"emb": jax.random.normal(next(keys), (vocab_size, d)), "layers": layers,
            "w_out": jnp.zeros((d, vocab_size)), "b_out": jnp.zeros((vocab_size,))}


def forward(layers, X, residual: bool):
    """The analysed network in jax: X (B, N, d_x) -> output at position 0, (B, d_x). Same
    function as :func:`depthwidth.theory.seprank.evaluate` (all coordinates)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    for layer in layers:
        out = 0.0
        for Wq, Wk, Wv, Wo in layer:
            q, k, v = X @ Wq.T, X @ Wk.T, X @ Wv.T
            out = out + (jnp.einsum("bia,bja->bij", q, k) @ v) @ Wo.T
        X = X + out if residual else out
    return X[:, 0, :]


def loss_fn(params, ctx, targets, residual: bool):
    """Mean next-character cross-entropy (nats) of contexts ``ctx`` (B, N) int, ``targets`` (B,)."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax.numpy as jnp

    h = forward(params["layers"], params["emb"][ctx], residual)
    logits = h @ params["w_out"] + params["b_out"]
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), targets[:, None], axis=1))


@dataclass
class TrainResult:
    """A finished run: the spec, float weights (numpy, ``layers`` as in :func:`init_params`),
    losses in nats/char: ``loss_first``/``loss_last`` (train batch, first/last step),
    ``heldout_loss`` and ``unigram_loss`` on the same held-out windows, ``vocab_size``,
    ``finite`` (False when training diverged; weights are then the last finite ones);
    ``init_layers``: the same run's weights at step 0 (the untrained reference)."""

    spec: TrainSpec
    layers: list
    init_layers: list
    loss_first: float
    loss_last: float
    heldout_loss: float
    unigram_loss: float
    vocab_size: int
    finite: bool

    def summary(self) -> dict:
        return {**asdict(self.spec), **{k: v for k, v in asdict(self).items() if k not in ("spec", "layers", "init_layers")}}


def _numpy_layers(layers) -> list:
    return [[tuple(np.asarray(w, dtype=np.float64) for w in head) for head in layer] for layer in layers]


def train(spec: TrainSpec, text: CharText) -> TrainResult:
    """Train ``spec`` on ``text`` (module doc); a diverged step (non-finite loss) stops the run
    and keeps the last finite weights. Deterministic for a spec on one CPU thread."""
    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import jax

    # jax/flax/optax: ~2.7 s at import; only training/evaluation pay it, query must start < 0.5 s
    import optax


    hostcpu.pin_one_core()
    V, N = len(text.vocab), spec.n_positions
    params = init_params(spec, V)
    init_layers = _numpy_layers(params["layers"])
    opt = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(spec.lr))
    state = opt.init(params)

    @jax.jit
    def step(params, state, ctx, tgt):
        loss, g = jax.value_and_grad(loss_fn)(params, ctx, tgt, spec.residual)
        upd, state = opt.update(g, state, params)
        return optax.apply_updates(params, upd), state, loss

    rng = np.random.default_rng(spec.seed)
    losses, finite = [], True
    for _ in range(spec.steps):
        ctx, tgt = windows(text.train, rng.integers(N - 1, len(text.train) - 1, spec.batch_size), N)
        new, new_state, loss = step(params, state, ctx, tgt)
        if not np.isfinite(float(loss)) or not all(np.isfinite(x).all() for x in jax.tree.leaves(new)):
            finite = False
            break
        params, state = new, new_state
        losses.append(float(loss))
    ev = np.random.default_rng(10_000 + spec.seed).integers(N - 1, len(text.heldout) - 1, spec.eval_windows)
    ctx, tgt = windows(text.heldout, ev, N)
    held = float(jax.jit(loss_fn, static_argnums=3)(params, ctx, tgt, spec.residual))
    return TrainResult(spec, _numpy_layers(params["layers"]), init_layers, losses[0] if losses else float("nan"), losses[-1] if losses else float("nan"),
                       held, unigram_loss(text.train, tgt, V), V, finite)


def quantise(layers, denominator: int, residual: bool):
    """The trained float weights rounded to multiples of 1/``denominator``, as an exact
    :class:`~depthwidth.theory.seprank.Network` (integers round(w·g), denominator g)."""
    ints = [[tuple(np.rint(np.asarray(w) * denominator).astype(np.int64) for w in head) for head in layer]
            for layer in layers]
    return seprank.network_from_arrays(ints, residual=residual, denominator=denominator)


def float_network(layers, residual: bool):
    """The trained float weights as a (float64) Network, for the float SVD cross-check."""
    return seprank.network_from_arrays([[tuple(np.asarray(w, np.float64) for w in h) for h in layer] for layer in layers],
                                       residual=residual)


def relative_rank(A: np.ndarray | None, rtol: float = 1e-3) -> int | None:
    """Numerical rank at relative tolerance: singular values of float64 ``A`` above
    ``rtol``·σ_max (None for no grid). Not a rank (the exact one is
    :func:`depthwidth.theory.seprank.mod_rank`): a measure of how many directions carry a
    non-negligible part of f on the grid."""
    if A is None:
        return None
    s = np.linalg.svd(np.asarray(A, np.float64), compute_uv=False)
    return int((s > rtol * s[0]).sum()) if s.size and s[0] > 0 else 0


def _float_grid(net, d_model: int, n_templates: int, n_positions: int) -> np.ndarray | None:
    """Grid matrix of ``net`` in float64 on the seed-0 templates: a float network evaluated in
    float64; an integer one (the random weights: their entries overflow float64 at L = 3)
    evaluated exactly, then scaled into range (:func:`depthwidth.theory.seprank.to_float`), or
    None where that big-integer grid is too large (:func:`depthwidth.theory.seprank.float_rank_of`)."""

    T = seprank.templates_for(n_templates, d_model, 0)
    part = seprank.balanced_partition(n_positions)
    if net.layers[0][0][0].dtype == object:
        if n_templates**n_positions * 3 ** len(net.layers) > seprank.FLOAT_CHECK_WORK:
            return None
        return seprank.to_float(seprank.grid_matrix(net, T, part))
    seprank.check_grid(n_templates, n_positions)
    idx = np.array(list(itertools.product(range(n_templates), repeat=n_positions)))
    vals = seprank.evaluate(net, np.asarray(T, dtype=np.float64)[idx]).reshape((n_templates,) * n_positions)
    return np.asarray(seprank.matricise(vals, part), np.float64)


def verdict(trained: dict, random: dict) -> str:
    """"equal", "below" or "above" (trained exact rank vs random), or "capped" when either is
    only a lower bound (:func:`depthwidth.theory.seprank.is_lower_bound`): then nothing follows."""
    if trained["lower_bound"] or random["lower_bound"]:
        return "capped"
    return "equal" if trained["rank"] == random["rank"] else "below" if trained["rank"] < random["rank"] else "above"


def measure_trained(res: TrainResult, *, n_positions: int = 2, max_templates: int = MAX_TEMPLATES,
                    denominators=DENOMINATORS) -> dict:
    """Trained vs untrained vs random vs bound at one shape, all on 2 measured positions by default.

    ``trained`` {g: rank of the weights rounded to 1/g (:func:`quantise`,
    :func:`depthwidth.theory.seprank.adaptive_rank`), a RankResult dict with its ``lower_bound``};
    ``init``: the same run's step-0 (Gaussian) weights rounded to the first grid, the untrained
    reference; ``random``: the committed table's procedure (integer weights uniform in
    [-R, R], R = :data:`depthwidth.theory.seprank.WEIGHT_RANGE`, best of 2 draws on the seed-0
    templates; :func:`depthwidth.theory.seprank.measure_adaptive`). On the seed-0 templates at the
    first grid's final M: ``rank_float_trained`` (float64 SVD rank of the float trained weights)
    and ``rel_rank_trained``/``rel_rank_init``/``rel_rank_random`` (:func:`relative_rank`, rtol
    1e-3; None where the random weights' big-integer grid is too large). Plus ``counting_bound``
    (a count, None where too large) and ``log3_counting_bound``, log₃ ranks, ``stable_across_grids``, ``trained_vs_init`` and
    ``trained_vs_random`` (:func:`verdict`) and the run's :meth:`TrainResult.summary`. Raises
    UserError on a grid too large (:func:`depthwidth.theory.seprank.grid_matrix`)."""
    s = res.spec
    trained = {str(g): seprank.adaptive_rank(quantise(res.layers, g, s.residual), n_positions=n_positions,
                                             max_templates=max_templates).to_dict() for g in denominators}
    head = trained[str(denominators[0])]
    init = seprank.adaptive_rank(quantise(res.init_layers, denominators[0], s.residual), n_positions=n_positions,
                                 max_templates=max_templates).to_dict()
    rnd = seprank.measure_adaptive(s.n_layer, s.d_model, s.n_head, residual=s.residual, n_positions=n_positions,
                                   max_templates=max_templates)
    rnd_net = seprank.random_network(s.n_layer, s.d_model, s.n_head, seed=rnd["seed"], residual=s.residual)
    A_tr = _float_grid(float_network(res.layers, s.residual), s.d_model, head["n_templates"], n_positions)
    A_rn = _float_grid(rnd_net, s.d_model, head["n_templates"], n_positions)
    A_in = _float_grid(float_network(res.init_layers, s.residual), s.d_model, head["n_templates"], n_positions)
    random = {k: rnd[k] for k in ("rank", "rank_float", "n_templates", "saturated", "cap", "seed", "lower_bound")}
    rt, rr = head["rank"], rnd["rank"]
    cb = {k: rnd[k] for k in ("counting_bound", "log3_counting_bound")}
    within = rt <= cb["counting_bound"] if cb["counting_bound"] is not None else rt == 0 or math.log(rt, 3) <= cb["log3_counting_bound"]
    return {**res.summary(), "measured_positions": n_positions, "trained": trained, "init": init, "random": random,
            "rank_float_trained": seprank.float_rank(A_tr), "rel_rank_trained": relative_rank(A_tr),
            "rel_rank_init": relative_rank(A_in), "rel_rank_random": relative_rank(A_rn), **cb,
            "log3_rank_trained": math.log(rt, 3) if rt else None, "log3_rank_random": math.log(rr, 3) if rr else None,
            "within_counting_bound": within, "stable_across_grids": len({t["rank"] for t in trained.values()}) == 1,
            "trained_vs_init": verdict(head, init), "trained_vs_random": verdict(head, random)}


TABLE_SHAPES = tuple((L, d, H) for L in (1, 2, 3) for d in (2, 3, 4) for H in (1, 2) if d % H == 0) \
    + ((1, 6, 1), (1, 6, 2))


def table(shapes=TABLE_SHAPES, *, residual=(False, True), steps: int = 400, seed: int = 0, corpus: str = "austen",
          data_dir=None, max_templates: int = MAX_TEMPLATES, progress=None) -> list[dict]:
    """:func:`train` then :func:`measure_trained` for every shape and residual setting (rows in
    that order); ``progress(i, n, row)`` after each. Raises UserError (corpus, sizes)."""
    text = load_chars(corpus, data_dir)
    todo = [(sh, r) for sh in shapes for r in residual]
    rows = []
    for i, ((L, d, H), r) in enumerate(todo):
        res = train(TrainSpec(L, d, H, residual=r, steps=steps, seed=seed, corpus=corpus), text)
        rows.append(measure_trained(res, max_templates=max_templates))
        if progress:
            progress(i + 1, len(todo), rows[-1])
    return rows


def write_table(out: str, *, steps: int = 400, seed: int = 0, corpus: str = "austen", data_dir=None,
                max_templates: int = MAX_TEMPLATES, progress=None) -> dict:
    """Measure :data:`TABLE_SHAPES` (both residual settings) and write ``out/trained.json``
    atomically (:meth:`depthwidth.storage.ResultsStore.replace`): {"rows", "method", ...}."""

    if Path(out).exists() and not Path(out).is_dir():  # before the table's training runs, not after
        raise UserError(f"--out {out} exists and is not a directory")
    rows = table(steps=steps, seed=seed, corpus=corpus, data_dir=data_dir, max_templates=max_templates,
                 progress=progress)
    spec = TrainSpec(1, 2)
    doc = {"what": "exact grid-tensor rank of the analysed self-attention network after a short training run on "
                   "real text, next to the random-weight rank at the same shape (experiments.seprank_train)",
           "method": f"char-level next-character prediction on {corpus} (train split), context of {spec.n_positions} "
                     f"characters (latest at position 0), embedding V x d_x and linear read-out of position 0; "
                     f"Adam lr {spec.lr}, clip 1.0, batch {spec.batch_size}, {steps} steps, seed {seed}; trained "
                     f"weights rounded to multiples of 1/{DENOMINATORS[0]} (headline) and 1/{DENOMINATORS[1]}, rank of the "
                     "grid on distinct integer templates over F_p for two primes by FLINT nmod_mat (a lower bound on "
                     "the rank over Q; adaptive M as in table.json, at most "
                     f"{max_templates}); measured at 2 positions (the counting bound's setting)",
           "command": "depthwidth seprank-trained --table --out results/seprank",
           "n_positions_trained": spec.n_positions, "n_positions_measured": 2, "steps": steps, "seed": seed,
           "corpus": corpus, "denominators": list(DENOMINATORS), "max_templates": max_templates, "rows": rows}
    storage.open_results(out).replace("trained.json", doc)
    return doc
