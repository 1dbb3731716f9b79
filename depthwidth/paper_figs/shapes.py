"""Public shapes (depth L, width d_x) of well-known decoder-only language models, with sources.

Used by the optimal-depth figure to place real models next to the law. Each row is what the
model's paper (or official model card) reports; ``params`` is the size the source quotes (all
parameters, embeddings included), kept only to label the point and to sanity-check the row.

Placement uses the non-embedding count **N = 12·L·d_x²** (Kaplan et al. 2020, §2.1), the N of
Levine et al.'s law, for every model alike. That count is exact (up to biases and norms) for the
GPT-2 arrangement: attention 4·d², MLP with a 4·d hidden layer 8·d². It is approximate for
blocks built differently (``block`` column): LLaMA's SwiGLU MLP with a ≈ 8/3·d hidden layer has
3·(8/3)·d² = 8·d² weights, so 12·L·d² still holds to a few percent; PaLM's SwiGLU MLP with a 4·d
hidden layer has 12·d² and its multi-query attention ≈ 2·d², so its true count is ≈ 14·L·d²
(the figure places PaLM about 15 % left of its real non-embedding size).
"""

from __future__ import annotations

from dataclasses import dataclass

from depthwidth.theory.accounting import kaplan_n

GELU = "GELU MLP, hidden 4d"


@dataclass(frozen=True)
class ModelShape:
    """One model: ``name`` (as its authors call it), ``family`` (groups markers), ``label``
    (short text on the figure), ``n_layer`` L, ``d_model`` d_x, ``n_head`` H, ``params``
    (parameters as quoted by the source, all included), ``block`` (MLP/attention type, which
    decides how well 12·L·d² counts it) and ``source`` (paper, table or section)."""

    name: str
    family: str
    label: str
    n_layer: int
    d_model: int
    n_head: int
    params: float
    block: str
    source: str

    @property
    def kaplan_params(self) -> int:
        """N = 12·L·d_x² (Kaplan et al. 2020): where the figure places the model."""
        return kaplan_n(self.n_layer, self.d_model)


_GPT2 = "Radford et al. 2019, 'Language Models are Unsupervised Multitask Learners', Table 2"
_GPT3 = "Brown et al. 2020, arXiv 2005.14165, Table 2.1"
_LLAMA = "Touvron et al. 2023, arXiv 2302.13971, Table 2"

SHAPES: tuple[ModelShape, ...] = (
    ModelShape("GPT-2 (117M)", "GPT-2", "GPT-2 S", 12, 768, 12, 117e6, GELU, _GPT2),
    ModelShape("GPT-2 (345M)", "GPT-2", "GPT-2 M", 24, 1024, 16, 345e6, GELU, _GPT2),
    ModelShape("GPT-2 (762M)", "GPT-2", "GPT-2 L", 36, 1280, 20, 762e6, GELU, _GPT2),
    ModelShape("GPT-2 (1542M)", "GPT-2", "GPT-2 XL", 48, 1600, 25, 1542e6, GELU, _GPT2),
    ModelShape("GPT-3 Small", "GPT-3", "GPT-3 125M", 12, 768, 12, 125e6, GELU, _GPT3),
    ModelShape("GPT-3 Medium", "GPT-3", "GPT-3 350M", 24, 1024, 16, 350e6, GELU, _GPT3),
    ModelShape("GPT-3 Large", "GPT-3", "GPT-3 760M", 24, 1536, 16, 760e6, GELU, _GPT3),
    # Table 2.1 gives XL 24 heads of 128 (= 3072, not d_model = 2048); kept as published.
    ModelShape("GPT-3 XL", "GPT-3", "GPT-3 1.3B", 24, 2048, 24, 1.3e9, GELU, _GPT3),
    ModelShape("GPT-3 2.7B", "GPT-3", "GPT-3 2.7B", 32, 2560, 32, 2.7e9, GELU, _GPT3),
    ModelShape("GPT-3 6.7B", "GPT-3", "GPT-3 6.7B", 32, 4096, 32, 6.7e9, GELU, _GPT3),
    # Table 2.1 prints d_model = 5140 for 13B (its 40 heads of 128 make 5120); kept as published.
    ModelShape("GPT-3 13B", "GPT-3", "GPT-3 13B", 40, 5140, 40, 13.0e9, GELU, _GPT3),
    ModelShape("GPT-3 175B", "GPT-3", "GPT-3 175B", 96, 12288, 96, 175.0e9, GELU, _GPT3),
    ModelShape("Gopher 280B", "Gopher/Chinchilla", "Gopher 280B", 80, 16384, 128, 280e9, GELU,
               "Rae et al. 2021, arXiv 2112.11446, Table 1"),
    ModelShape("Chinchilla 70B", "Gopher/Chinchilla", "Chinchilla 70B", 80, 8192, 64, 70e9, GELU,
               "Hoffmann et al. 2022, arXiv 2203.15556, Table 4"),
    ModelShape("LLaMA 7B", "LLaMA", "LLaMA 7B", 32, 4096, 32, 6.7e9, "SwiGLU MLP, hidden ~8d/3", _LLAMA),
    ModelShape("LLaMA 13B", "LLaMA", "LLaMA 13B", 40, 5120, 40, 13.0e9, "SwiGLU MLP, hidden ~8d/3", _LLAMA),
    ModelShape("LLaMA 65B", "LLaMA", "LLaMA 65B", 80, 8192, 64, 65.2e9, "SwiGLU MLP, hidden ~8d/3", _LLAMA),
    ModelShape("PaLM 540B", "PaLM", "PaLM 540B", 118, 18432, 48, 540e9,
               "SwiGLU MLP, hidden 4d; multi-query attention (true N ~ 14*L*d^2)",
               "Chowdhery et al. 2022, arXiv 2204.02311, Table 1"),
    ModelShape("BLOOM", "BLOOM", "BLOOM 176B", 70, 14336, 112, 176e9, GELU,
               "BigScience Workshop 2022, arXiv 2211.05100, §3; model card bigscience/bloom"),
    # Wu et al. chose L = 70 and the width with Levine et al.'s law (which gives ~7510), then
    # rounded it to 40 heads of 192: the one model here shaped by the law itself.
    ModelShape("BloombergGPT", "BloombergGPT", "BloombergGPT 50B", 70, 7680, 40, 50.6e9, GELU,
               "Wu et al. 2023, arXiv 2303.17564, §2.4"),
    ModelShape("Megatron-Turing NLG 530B", "MT-NLG", "MT-NLG 530B", 105, 20480, 128, 530e9, GELU,
               "Smith et al. 2022, arXiv 2201.11990, §3"),
)


def grouped_labels(shapes=SHAPES, rel_width: float = 0.01) -> list[tuple[int, int, str, list[ModelShape]]]:
    """Rows merged when they would draw as one point: same n_layer and widths within
    ``rel_width`` (GPT-2 S and GPT-3 125M are both 12×768; GPT-3 13B is 40×5140 and LLaMA 13B
    40×5120). Returns (n_layer, d_model of the first row, joined label, rows) in table order."""
    groups: list[list[ModelShape]] = []
    for s in shapes:
        for g in groups:
            if g[0].n_layer == s.n_layer and abs(g[0].d_model - s.d_model) <= rel_width * g[0].d_model:
                g.append(s)
                break
        else:
            groups.append([s])
    return [(g[0].n_layer, g[0].d_model, " / ".join(s.label for s in g), g) for g in groups]


def table() -> list[dict]:
    """The table as JSON-ready rows (all fields plus ``kaplan_params``)."""
    return [{**s.__dict__, "kaplan_params": s.kaplan_params} for s in SHAPES]
