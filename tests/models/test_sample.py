"""``depthwidth sample`` on a freshly trained, kept run (char-level tiny shakespeare, the real
corpus): the text is the model's (greedy equals the uncached argmax loop), seeded, with the
tokens/s line; bad input is one line and exit 2."""

import json

import numpy as np
import pytest

from depthwidth.cli import main
from depthwidth.config import DataConfig, MeshConfig, ModelConfig, RunConfig, TrainConfig
from depthwidth.models.train import train_run

CFG = RunConfig(
    model=ModelConfig(n_layer=2, d_model=32, n_head=2, seq_len=32),
    data=DataConfig(corpus="tinyshakespeare", tokenizer="char"),
    train=TrainConfig(steps=20, batch_size=8, lr=3e-3, warmup_steps=4, log_every=5, ckpt_every=10,
                      eval_batches=2, test_sequences=64, keep_weights=True),
    mesh=MeshConfig(data=1),
)


@pytest.fixture(scope="module")
def kept_run(tmp_path_factory, corpora_dir):
    mp = pytest.MonkeyPatch()
    mp.setenv("DEPTHWIDTH_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))
    mp.setenv("DEPTHWIDTH_DATA", str(corpora_dir))
    results = tmp_path_factory.mktemp("sample")
    rec = train_run(CFG, results, progress=False, verbose=False)
    yield results / "runs" / rec["run_id"]
    mp.undo()


def _json(argv, capsys):
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_greedy_sample_is_the_models_argmax_text(kept_run, corpora_dir, capsys):
    from depthwidth.data.prepare import prepared_dir_for
    from depthwidth.data.tokenfiles import open_prepared
    from depthwidth.models.train import load_run

    r = _json(["sample", str(kept_run), "--prompt", "ROMEO:", "--temperature", "0", "--max-new-tokens", "12",
               "--data", str(corpora_dir)], capsys)
    cfg, model = load_run(kept_run)
    prep = open_prepared(prepared_dir_for(cfg.data, corpora_dir))
    seq = np.array([prep.encode("ROMEO:")], np.int32)
    for _ in range(12):  # no cache: the whole sequence through the model for each token
        seq = np.concatenate([seq, np.asarray(model(seq))[:, -1].argmax(-1)[:, None].astype(np.int32)], axis=1)
    assert r["text"] == prep.decode(seq[0]) and r["text"].startswith("ROMEO:")
    assert r["prompt_tokens"] == 6 and r["new_tokens"] == 12 and r["temperature"] == 0.0
    assert r["tokens_per_s"] == pytest.approx(12 / (r["prefill_s"] + r["step_s_total"]))


def test_sampling_is_seeded_and_fills_the_context_by_default(kept_run, capsys):
    a = _json(["sample", str(kept_run), "--seed", "3"], capsys)
    b = _json(["sample", str(kept_run), "--seed", "3"], capsys)
    c = _json(["sample", str(kept_run), "--seed", "4", "--top-k", "0"], capsys)
    assert a["text"] == b["text"] != c["text"]
    assert a["new_tokens"] == 31 and a["top_k"] == 200 and c["top_k"] is None  # T=32 less the "\n" prompt
    assert main(["sample", str(kept_run), "--prompt", "To be", "--max-new-tokens", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("To be") and "\n---\n5 new tokens from run " in out and " tokens/s (prefill of 5 tokens" in out


@pytest.mark.parametrize("extra,msg", [
    (["--temperature", "-1"], "--temperature must be >= 0"),
    (["--max-new-tokens", "40"], "prompt of 1 token(s) + --max-new-tokens 40 = 41 exceeds the model's context of 32"),
    (["--max-new-tokens", "0"], "--max-new-tokens must be >= 1"),
    (["--top-k", "-2"], "--top-k must be >= 0"),
    (["--prompt", "\u20ac"], "characters not in this char vocabulary"),
])
def test_bad_input_is_one_line_exit_2(kept_run, extra, msg, capsys):
    assert main(["sample", str(kept_run)] + extra) == 2
    err = capsys.readouterr().err
    assert msg in err and err.count("\n") == 1


def test_a_run_without_kept_weights_or_no_run(tmp_path, capsys):
    assert main(["sample", str(tmp_path)]) == 2
    assert "record.json" in capsys.readouterr().err
    assert main(["sample"]) == 2
    assert "one of the arguments RUN_DIR --gpt2 is required" in capsys.readouterr().err


def test_unkept_weights_are_refused(kept_run, tmp_path, capsys):
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(kept_run, copy, ignore=shutil.ignore_patterns("ckpt"))
    assert main(["sample", str(copy)]) == 2
    assert "weights were not kept" in capsys.readouterr().err


def test_gpt2_directory(tmp_path, capsys):
    """--gpt2 reads a save_pretrained directory (a tiny random GPT-2 with a byte-level BPE
    tokenizer trained here): greedy text equals Hugging Face generate's."""
    torch = pytest.importorskip("torch", reason="torch not installed: --gpt2 needs it")
    transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install '.[peers]')")
    from depthwidth.data.tokenizer import train_bpe

    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=train_bpe("to be or not to be, that is it " * 20, 300))
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=tok.vocab_size, n_positions=24, n_embd=32, n_layer=2, n_head=2, bos_token_id=None,
        eos_token_id=None)).eval()
    hf.save_pretrained(tmp_path / "gpt2")
    tok.save_pretrained(tmp_path / "gpt2")
    r = _json(["sample", "--gpt2", str(tmp_path / "gpt2"), "--prompt", "to be", "--temperature", "0",
               "--max-new-tokens", "6"], capsys)
    ids = torch.tensor([tok.encode("to be")])
    with torch.no_grad():
        want = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6, do_sample=False,
                           pad_token_id=0)[0].tolist()
    assert r["text"] == tok.decode(want) and r["new_tokens"] == 6
    assert main(["sample", "--gpt2", str(tmp_path / "nothing")]) == 2
    assert "not a directory" in capsys.readouterr().err
