"""exp layerdrop on a tiny trained model: exact 0-deletion, deletion = zeroed block, equal parameter
counts of the width control, resumability, bad input."""

import json
import shutil

import numpy as np
import pytest

from depthwidth.cli import main
from depthwidth.errors import UserError
from depthwidth.experiments import layerdrop as ld

# A 4-layer model on the real tiny-shakespeare text, trained through `exp layerdrop` itself (the
# smoke preset's base: T=32, B=16, test_sequences 64), 30 steps: seconds on CPU.
TRAIN = ["--preset", "smoke", "--set", "model.n_layer=4", "--set", "model.d_model=16",
         "--set", "train.steps=30", "--set", "train.ckpt_every=50"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpora_dir):
    """(results dir, the JSON output of the first full run, the trained run's record and dir)."""
    from depthwidth import records

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEPTHWIDTH_DATA", str(corpora_dir))
        mp.setenv("DEPTHWIDTH_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
        results = tmp_path_factory.mktemp("layerdrop")
        out = _run([*TRAIN, "--results", str(results), "--k", "1,2", "--control-seeds", "1", "--no-progress"])
        (train_rec,) = [r for r in records.iter_records(results) if records.kind_of(r) == "train"]
        yield results, out, train_rec, records.run_dir(results, train_rec["run_id"])


def _run(argv):
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["exp", "layerdrop", *argv, "--json"])
    assert rc == 0
    return json.loads(buf.getvalue())


@pytest.fixture(scope="module")
def loaded(trained):
    from depthwidth.models.train import load_run

    _, _, rec, rdir = trained
    cfg, model = load_run(rdir)
    return rec, cfg, ld.pure_params(model), ld.Evaluator(cfg, ld.test_split(cfg))


def test_zero_deletion_reproduces_the_record_exactly(trained, loaded):
    rec, cfg, params, ev = loaded
    assert ev.loss(cfg, params)["test_loss"] == rec["test_loss"]  # bit for bit, not approx
    _, out, _, _ = trained
    assert out["summary"]["base_test_loss"] == rec["test_loss"]
    from depthwidth.experiments import kinds

    (none,) = [r for r in kinds.done(trained[0], "layerdrop").values() if r["config"]["deletion"]["what"] == "none"]
    assert none["test_loss"] == rec["test_loss"] and none["delta_test_loss"] == 0.0
    assert none["test_loss_chunks"] == rec["test_loss_chunks"]


@pytest.mark.parametrize("i", [0, 2, 3])
def test_deleting_a_block_equals_zeroing_its_output_projections(loaded, i):
    # Pre-LN: with attn.proj and mlp.proj (kernels and biases) zero, block i adds nothing to the
    # residual stream, so it is the identity: the 4-layer model with block i zeroed must compute
    # the 3-layer model without it, logits and test loss.
    import dataclasses

    from flax import nnx

    from depthwidth.models.model import LM

    rec, cfg, params, ev = loaded
    assert cfg.model.pre_ln
    dcfg, dropped = ld.apply_deletion(cfg, params, {"what": "layers", "k": 1, "start": i})
    assert dcfg.model.n_layer == 3
    zeroed = ld.zero_block_outputs(params, i)
    a = ev.loss(dcfg, dropped)["test_loss"]
    b = ev.loss(cfg, zeroed)["test_loss"]
    assert a == pytest.approx(b, rel=1e-6, abs=0) and a != rec["test_loss"]
    x = np.arange(2 * 32, dtype=np.int32).reshape(2, 32) % cfg.model.vocab_size

    def logits(c, p):
        graphdef, state = nnx.split(nnx.eval_shape(lambda: LM(c.model, rngs=nnx.Rngs(0))), nnx.Param)
        nnx.replace_by_pure_dict(state, p)
        return np.asarray(nnx.merge(graphdef, state)(x))

    np.testing.assert_allclose(logits(dcfg, dropped), logits(cfg, zeroed), rtol=0, atol=1e-5)
    assert dataclasses.replace(dcfg.model, n_layer=4) == cfg.model


def test_drop_layers_slices_the_layers_axis(loaded):
    _, _, params, _ = loaded
    out = ld.drop_layers(params, 1, 2)
    qkv, kept = params["blocks"]["attn"]["qkv"]["kernel"], out["blocks"]["attn"]["qkv"]["kernel"]
    assert kept.shape[0] == 2
    np.testing.assert_array_equal(np.asarray(kept), np.asarray(qkv)[[0, 3]])
    assert out["wte"] is params["wte"]
    with pytest.raises(UserError, match="cannot delete layers 3..4 of a 4-layer model"):
        ld.drop_layers(params, 3, 2)


def test_control_units_match_the_deleted_layers_parameter_count(loaded):
    # k blocks hold k(12d²+13d); a unit holds 2d+1 (fc column, fc bias, proj row) in each of L blocks.
    # L=16, d=48 (the preset): 28,272 per block / (16·97 = 1,552) = 18.22 -> 18 units (k=1),
    # 36.43 -> 36 (k=2), 72.87 -> 73 (k=4), of 192.
    assert [ld.control_units(k, 16, 48, 192) for k in (1, 2, 4)] == [18, 36, 73]
    for k, m in zip((1, 2, 4), (18, 36, 73)):
        layers = ld.removed_params({"what": "layers", "k": k}, 16, 48, 192)
        units = ld.removed_params({"what": "mlp_units", "k": k, "units_per_layer": m}, 16, 48, 192)
        assert layers == k * (12 * 48 * 48 + 13 * 48) and units == 16 * m * 97
        assert abs(units - layers) <= 16 * 97 / 2  # within half a unit per block
    # On the trained model: the parameters the sliced trees hold, counted leaf by leaf.
    import jax

    _, cfg, params, _ = loaded
    L, d, f = cfg.model.n_layer, cfg.model.d_model, cfg.model.ff_width

    def size(p):
        return sum(int(np.size(a)) for a in jax.tree.leaves(p))

    for k in (1, 2):
        m = ld.control_units(k, L, d, f)
        ccfg, cut = ld.apply_deletion(cfg, params, {"what": "mlp_units", "k": k, "units_per_layer": m,
                                                    "choice": "random", "seed": 0})
        _, lay = ld.apply_deletion(cfg, params, {"what": "layers", "k": k, "start": 0})
        assert ccfg.model.d_ff == f - m
        assert size(params) - size(cut) == L * m * (2 * d + 1)
        assert size(params) - size(lay) == k * (12 * d * d + 13 * d)
        assert abs((size(params) - size(cut)) - (size(params) - size(lay))) <= L * (2 * d + 1) / 2
    with pytest.raises(UserError, match="would remove"):
        ld.control_units(15, 16, 48, 192)


def test_unit_choice_norm_and_random(loaded):
    _, _, params, _ = loaded
    scores = ld.unit_scores(params)
    L, f = scores.shape
    keep = ld.units_to_keep(params, 5, "norm")
    assert keep.shape == (L, f - 5)
    for row, s in zip(keep, scores):  # every removed unit scores at most every kept one
        dropped = np.setdiff1d(np.arange(f), row)
        assert len(dropped) == 5 and s[dropped].max() <= s[row].min()
    r0, r0b, r1 = (ld.units_to_keep(params, 5, "random", s) for s in (0, 0, 1))
    np.testing.assert_array_equal(r0, r0b)
    assert not np.array_equal(r0, r1)
    # the sliced MLP computes the unit sum without the removed units
    cut = ld.drop_mlp_units(params, keep)
    fc = np.asarray(params["blocks"]["mlp"]["fc"]["kernel"])
    np.testing.assert_array_equal(np.asarray(cut["blocks"]["mlp"]["fc"]["kernel"])[1], fc[1][:, keep[1]])


def test_run_output_resumes_without_work(trained):
    results, out, rec, _ = trained
    # L=4, k in {1, 2}: 1 full + 4 + 3 offsets + 2 controls x (1 random + 1 norm) = 12 units
    assert out["units"] == out["evaluated"] == 12
    by_k = out["summary"]["by_k"]
    assert by_k["1"]["offsets"] == [0, 1, 2, 3] and by_k["2"]["offsets"] == [0, 1, 2]
    from depthwidth.experiments import kinds

    stored = kinds.done(results, "layerdrop")
    for r in stored.values():  # each Δ is its own loss minus the record's
        assert r["delta_test_loss"] == r["test_loss"] - rec["test_loss"]
    d1 = {r["config"]["deletion"]["start"]: r["delta_test_loss"] for r in stored.values()
          if r["config"]["deletion"]["what"] == "layers" and r["config"]["deletion"]["k"] == 1}
    assert by_k["1"]["delta"] == [d1[s] for s in range(4)]
    assert by_k["1"]["first"] == d1[0] and by_k["1"]["last"] == d1[3]
    assert by_k["1"]["cheapest"]["delta"] == min(d1.values())
    assert (results / "figures" / "exp_layerdrop.png").is_file() and (results / "figures" / "exp_layerdrop.pdf").is_file()
    mtimes = {p: p.stat().st_mtime_ns for p in results.glob("runs/*/record.json")}
    png = (results / "figures" / "exp_layerdrop.png").read_bytes()
    again = _run([*TRAIN, "--results", str(results), "--k", "1,2", "--control-seeds", "1", "--no-progress"])
    assert again["evaluated"] == 0 and again["summary"] == json.loads(json.dumps(out["summary"]))
    assert {p: p.stat().st_mtime_ns for p in results.glob("runs/*/record.json")} == mtimes  # nothing retrained
    assert (results / "figures" / "exp_layerdrop.png").read_bytes() == png  # redrawn from the records, same bytes


def test_paired_standard_error_by_hand():
    from depthwidth.fits.layerdrop import paired_se

    # chunk differences 0.5, 1, 1: sample std sqrt(1/12), over sqrt(3) -> exactly 1/6
    assert paired_se({"test_loss_chunks": [1.0, 2.0, 3.0]}, {"test_loss_chunks": [0.5, 1.0, 2.0]}) == pytest.approx(1 / 6)
    assert paired_se({"test_loss_chunks": [1.0]}, {"test_loss_chunks": [0.5]}) is None


@pytest.mark.parametrize("argv, needle", [
    (["--k", "0"], "--k 0: the run length must be in 1..3"),
    (["--k", "4"], "--k 4: the run length must be in 1..3"),
    (["--k", "1,x"], "cannot parse --k 'x'"),
    (["--k", "2,2"], "--k repeats an element"),
    (["--control-seeds", "-1"], "--control-seeds must be >= 0"),
])
def test_bad_input_is_one_line(trained, tmp_path, capsys, argv, needle):
    rc = main(["exp", "layerdrop", *TRAIN, "--results", str(tmp_path / "r"), "--no-progress", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r").exists()  # failed before any training


def test_a_run_without_kept_weights_is_one_line(trained, tmp_path, capsys):
    _, _, rec, rdir = trained
    bare = tmp_path / "runs" / rec["run_id"]
    bare.mkdir(parents=True)
    shutil.copy(rdir / "record.json", bare / "record.json")
    rc = main(["exp", "layerdrop", "--run", str(bare), "--k", "1,2", "--results", str(tmp_path / "r"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "weights were not kept" in err and len(err.strip().splitlines()) == 1
    rc = main(["exp", "layerdrop", "--run", str(tmp_path / "nothing"), "--results", str(tmp_path / "r")])
    assert rc == 2 and "no record.json" in capsys.readouterr().err
