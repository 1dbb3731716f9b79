"""The stack count equals HF transformers' GPT2LMHeadModel without wte/wpe, for any shape."""

import pytest

from depthwidth.theory.accounting import param_counts, stack_params

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _hf_counts(n_layer, n_embd, n_head, n_inner=None, vocab=101, positions=17, tied=True):
    config = transformers.GPT2Config(
        vocab_size=vocab,
        n_positions=positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_inner=n_inner,
        tie_word_embeddings=tied,
    )
    with torch.device("meta"):  # shapes only: no memory, no random init cost
        model = transformers.GPT2LMHeadModel(config)
    named = dict(model.named_parameters())  # shared (tied) tensors appear once
    total = sum(p.numel() for p in named.values())
    stack = sum(
        p.numel()
        for n, p in named.items()
        if n.startswith("transformer.") and not n.startswith(("transformer.wte", "transformer.wpe"))
    )
    return stack, total


@pytest.mark.parametrize(
    "n_layer,n_embd,n_head,n_inner",
    [
        (1, 32, 4, None),
        (2, 48, 3, None),
        (3, 40, 5, None),
        (2, 64, 8, 100),
        (1, 96, 12, None),
        (4, 30, 1, None),
    ],
)
def test_stack_matches_transformers(n_layer, n_embd, n_head, n_inner):
    stack, total = _hf_counts(n_layer, n_embd, n_head, n_inner)
    assert stack == stack_params(n_layer, n_embd, d_ff=n_inner)
    ours = param_counts(n_layer, n_embd, n_head, vocab_size=101, seq_len=17, tied_head=True, d_ff=n_inner)
    assert total == ours["total_params"]


def test_untied_head_matches_transformers():
    _, total = _hf_counts(2, 48, 3, tied=False)
    assert total == param_counts(2, 48, 3, vocab_size=101, seq_len=17, tied_head=False)["total_params"]


def test_gpt2_small_matches_transformers():
    stack, total = _hf_counts(12, 768, 12, vocab=50257, positions=1024)
    assert stack == 85_056_000
    assert total == 124_439_808
