"""fig5 with the trained-network overlay (paper_figs.seprank_fig): drawn from stored tables only."""

import json
import shutil
from pathlib import Path

from depthwidth.cli import main

TABLE = Path(__file__).resolve().parents[2] / "results" / "seprank" / "table.json"


def test_trained_overlay_beside_the_table(tmp_path):
    shutil.copy(TABLE, tmp_path / "table.json")
    row = {"n_layer": 1, "d_model": 2, "n_head": 1, "residual": False, "log3_rank_trained": 1.0}
    (tmp_path / "trained.json").write_text(json.dumps({"rows": [row], "steps": 400, "corpus": "austen"}))
    out = tmp_path / "figs"
    assert main(["seprank-fig", "--table", str(tmp_path / "table.json"), "--out", str(out), "--json"]) == 0
    assert (out / "fig5_measured_separation_rank.png").stat().st_size > 0
    assert main(["seprank-fig", "--table", str(tmp_path / "table.json"), "--trained", "none", "--out", str(out)]) == 0
    assert main(["seprank-fig", "--table", str(tmp_path / "table.json"), "--trained", str(tmp_path / "no.json"),
                 "--out", str(out)]) == 2
