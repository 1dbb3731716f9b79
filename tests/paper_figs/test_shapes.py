"""The model-shape table behind the optimal-depth figure: placement count, merging, sources."""

import pytest

from depthwidth.paper_figs.shapes import SHAPES, grouped_labels, table


def test_kaplan_count_of_gpt3_175b():
    # 12288² = 150,994,944; ×96 layers = 14,495,514,624; ×12 = 173,946,175,488.
    row = next(s for s in SHAPES if s.label == "GPT-3 175B")
    assert (row.n_layer, row.d_model) == (96, 12288)
    assert row.kaplan_params == 173_946_175_488


@pytest.mark.parametrize("row", SHAPES, ids=lambda s: s.label)
def test_rows_are_consistent_with_quoted_size(row):
    # A typo in L or d moves 12·L·d² far from the quoted size. The quoted size includes the
    # embeddings (GPT-2 small: 12·12·768² = 84.9M of 117M, ratio 0.73, the smallest here) and,
    # for PaLM, a ~14·L·d² block (481B of 540B, 0.89), so every row lies in [0.6, 1.02].
    ratio = row.kaplan_params / row.params
    assert 0.6 <= ratio <= 1.02, f"{row.name}: 12*L*d^2 = {row.kaplan_params:.3g} vs quoted {row.params:.3g}"


def test_rows_name_a_source_and_heads_divide_width():
    # Brown et al. 2020 Table 2.1 itself is inconsistent for two rows (XL: 24 heads × 128 =
    # 3072 ≠ 2048; 13B: 40 × 128 = 5120 ≠ 5140); the table keeps the published numbers.
    published_quirks = {"GPT-3 XL", "GPT-3 13B"}
    for s in SHAPES:
        assert any(str(y) in s.source for y in range(2019, 2024)), s.name
        assert (s.d_model % s.n_head == 0) != (s.name in published_quirks), s.name


def test_grouping_merges_shapes_that_draw_as_one_point():
    groups = {label: (L, d) for L, d, label, _ in grouped_labels()}
    # 21 rows; merged: GPT-2 S = GPT-3 125M (12×768), GPT-2 M = GPT-3 350M (24×1024),
    # GPT-3 6.7B = LLaMA 7B (32×4096), GPT-3 13B ≈ LLaMA 13B (40×5140 vs 40×5120, 0.4% apart),
    # Chinchilla 70B = LLaMA 65B (80×8192): 21 − 5 = 16 points.
    assert len(SHAPES) == 21
    assert len(groups) == 16
    assert groups["GPT-2 S / GPT-3 125M"] == (12, 768)
    assert groups["GPT-3 13B / LLaMA 13B"] == (40, 5140)
    assert groups["Chinchilla 70B / LLaMA 65B"] == (80, 8192)
    assert "GPT-3 760M" in groups  # 24×1536 shares depth with 24×1024 but not width


def test_table_rows_are_json_ready():
    rows = table()
    assert len(rows) == len(SHAPES)
    assert rows[0]["kaplan_params"] == 12 * 12 * 768**2
