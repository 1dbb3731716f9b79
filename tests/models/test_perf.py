"""MFU (depthwidth.models.perf): per device, with the peak it used, flagged above 1."""

import pytest

from depthwidth.config import MeshConfig
from depthwidth.models import perf


def test_mfu_divides_by_every_device_that_trained():
    # Issue 10 item 6: 8 devices at 1e6 tokens/s x 6e3 FLOPs/token = 6e9 FLOP/s against one
    # device's 1e9 peak gave 6.0; against 8 x 1e9 it is 0.75.
    assert perf.mfu(1e6, 6e3, 1e9) == pytest.approx(6.0)
    assert perf.mfu(1e6, 6e3, 1e9, n_devices=8) == pytest.approx(0.75)
    with pytest.raises(ValueError):
        perf.mfu(1e6, 6e3, 1e9, n_devices=0)
    assert perf.mfu_warning(0.75) is None and perf.mfu_warning(None) is None
    assert "above 1" in perf.mfu_warning(6.0)


def test_a_record_on_8_devices_states_them(tmp_path, monkeypatch, corpora_dir):
    # The test session has 8 fake CPU devices (conftest); mesh.data=0 trains on all of them.
    from depthwidth.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from depthwidth.models.train import train_run

    monkeypatch.setenv("DEPTHWIDTH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("DEPTHWIDTH_DATA", str(corpora_dir))
    cfg = RunConfig(model=ModelConfig(n_layer=1, d_model=32, n_head=2, seq_len=32),
                    data=DataConfig(corpus="tinyshakespeare", tokenizer="char"),
                    train=TrainConfig(steps=4, batch_size=8, warmup_steps=1, log_every=2, ckpt_every=4,
                                      eval_batches=1, test_sequences=16),
                    mesh=MeshConfig(data=0))
    rec = train_run(cfg, tmp_path, progress=False, verbose=False)
    assert rec["mfu_devices"] == 8
    assert rec["mfu"] == pytest.approx(rec["tokens_per_s"] * rec["flops_per_token"] / (8 * rec["peak_flops_per_s"]))
