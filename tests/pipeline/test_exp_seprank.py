"""``depthwidth exp seprank``: the separation-rank kind measures a missing table only, summarises
the stored tables and draws fig5 exactly as ``seprank-fig`` does."""

import json
import shutil
from pathlib import Path

from depthwidth.cli import main
from depthwidth.theory import seprank

COMMITTED = Path(__file__).resolve().parents[2] / "results" / "seprank"


def test_stored_tables_are_summarised_and_drawn_as_seprank_fig_draws_them(tmp_path, capsys):
    res = tmp_path / "seprank"
    res.mkdir()
    for name in ("table.json", "trained.json"):
        shutil.copy(COMMITTED / name, res / name)
    assert main(["exp", "seprank", "--results", str(res), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["summary"]
    table = json.loads((COMMITTED / "table.json").read_text())["rows"]
    assert out["measured"] == [] and s["rows"] == len(table) and s["exact"] + s["lower_bounds"] == len(table)
    assert s["lower_bounds"] == sum(r["lower_bound"] for r in table) and s["within_counting_bound"]
    assert s["trained"]["rows"] == len(json.loads((COMMITTED / "trained.json").read_text())["rows"])
    assert [Path(f).name for f in out["figures"]] == ["fig5_measured_separation_rank.png",
                                                      "fig5_measured_separation_rank.pdf"]
    # the alias draws the same bytes (the trained.json beside the table overlaid by both)
    assert main(["seprank-fig", "--table", str(res / "table.json"), "--out", str(tmp_path / "alias"), "--json"]) == 0
    capsys.readouterr()
    for f in out["figures"]:
        assert Path(f).read_bytes() == (tmp_path / "alias" / Path(f).name).read_bytes()
    assert sorted(p.name for p in res.iterdir()) == ["figures", "table.json", "trained.json"]  # nothing measured


def test_a_missing_table_is_measured_once_and_only_when_allowed(tmp_path, monkeypatch, capsys):
    res = tmp_path / "fresh"
    assert main(["exp", "seprank", "--results", str(res)]) == 2  # ~40 min estimated: refused
    assert "--allow-long" in capsys.readouterr().err and not res.exists()

    calls = []

    def small_table(out, progress=None, **kw):  # the README's table is ~40 min; two shapes here
        calls.append(out)
        rows = seprank.table(((1, 2, 1), (2, 2, 1)), residual=(False,), max_templates=64, progress=progress)
        Path(out).mkdir(parents=True, exist_ok=True)
        doc = {"rows": rows, "complete": True, "n_positions": 2}
        (Path(out) / "table.json").write_text(json.dumps(doc))
        return doc

    monkeypatch.setattr(seprank, "write_table", small_table)
    argv = ["exp", "seprank", "--results", str(res), "--allow-long", "--no-progress", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["measured"] == ["table.json"] and out["summary"]["rows"] == 2 and out["summary"]["trained"] is None
    assert main(argv) == 0 and json.loads(capsys.readouterr().out)["measured"] == []
    assert calls == [str(res)]
