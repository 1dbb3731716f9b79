"""The documentation is checked against the code: README.md and docs/.

Every documented command line (``depthwidth ...`` or ``./dw ...``, in a code block or inline
code) is parsed by the real parser, so an unknown flag or subcommand fails here. The cheap ones
shown with their output (``$ depthwidth theory|query|fit|lrscan ...`` followed by what it
printed) are run on the committed records and their output compared line by line; a shown
``depthwidth: error: ...`` line is a documented refusal, compared with stderr (exit 2). The generated
parts of the site (docs/_hooks/gen.py) are built from the stored results and checked for real
values, and no file cites a document the repository does not hold.
"""

from __future__ import annotations

import importlib.util
import io
import math
import re
import shlex
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from depthwidth.cli import build_parser, main
from depthwidth.errors import UserError

REPO = Path(__file__).resolve().parents[1]
DOCS = sorted(p for p in (REPO / "docs").rglob("*.md") if "_hooks" not in p.parts)
FILES = [REPO / "README.md", *DOCS]
RUNNABLE = ("theory", "query", "fit", "lrscan")  # read committed files only, seconds each
ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=")
PROMPT = re.compile(r"^(?:[\w.-]*\$ )")


def _gen():
    spec = importlib.util.spec_from_file_location("docs_gen", REPO / "docs" / "_hooks" / "gen.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _blocks(text: str):
    """(code lines) of every fenced block and every 4-space indented block outside fences."""
    lines = text.split("\n")
    i, prose = 0, []
    while i < len(lines):
        if lines[i].lstrip().startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("```"):
                j += 1
            yield lines[i + 1:j]
            i = j + 1
            continue
        if lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()) and lines[i].strip():
            j = i
            while j < len(lines) and lines[j].startswith("    "):
                j += 1
            yield [x[4:] for x in lines[i:j]]
            i = j
            continue
        prose.append(lines[i])
        i += 1
    yield from ([m] for m in re.findall(r"`([^`\n]+)`", "\n".join(prose)))


def _joined(block: list[str]) -> list[str]:
    out, cur = [], ""
    for line in block:
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        out.append(cur + line)
        cur = ""
    if cur:
        out.append(cur)
    return out


def _commands_in(line: str) -> list[list[str]]:
    """argv lists (after 'depthwidth' / './dw') of the commands on one shell line."""
    line = PROMPT.sub("", line.strip())
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError:
        return []
    found, seg = [], []
    for tok in [*tokens, ";"]:
        if tok in (";", "&&", "||", "|"):
            while seg and ENV.match(seg[0]):
                seg = seg[1:]
            if seg and seg[0] in ("depthwidth", "./dw"):
                found.append(seg[1:])
            seg = []
            continue
        if " " in tok and ("./dw " in tok or "depthwidth " in tok):  # e.g. --command='cd x && ./dw ...'
            found.extend(_commands_in(tok))
        seg.append(tok)
    return found


def documented_commands():
    out = []
    for path in FILES:
        for block in _blocks(path.read_text()):
            inline = len(block) == 1 and not path.read_text().count(f"```\n{block[0]}\n")
            for line in _joined(block):
                for argv in _commands_in(line):
                    out.append(pytest.param(argv, inline, id=f"{path.relative_to(REPO)}: {' '.join(argv)[:70]}"))
    return out


def shown_outputs():
    """($ command, its printed lines) for the cheap commands shown with their output."""
    out = []
    for path in FILES:
        for block in _blocks(path.read_text()):
            cmd, shown = None, []
            for line in [*_joined(block), "$ END"]:
                if PROMPT.match(line):
                    if cmd is not None and shown and cmd[0] in RUNNABLE:
                        out.append(pytest.param(cmd, shown, id=f"{path.relative_to(REPO)}: {' '.join(cmd)[:70]}"))
                    cmds = _commands_in(line)
                    cmd, shown = (cmds[0] if cmds else None), []
                elif cmd is not None:
                    shown.append(line)
    return out


PARSER = None


def _parser():
    global PARSER
    if PARSER is None:
        PARSER = build_parser()
    return PARSER


def test_the_docs_document_many_commands():
    cmds = documented_commands()
    assert len(cmds) > 100, len(cmds)
    assert len(shown_outputs()) >= 8


@pytest.mark.parametrize(("argv", "inline"), documented_commands())
def test_documented_command_parses(argv, inline):
    if not argv or argv[0] == "test" or "--help" in argv or "-h" in argv or argv == ["--version"]:
        return  # ./dw test passes its arguments to pytest
    try:
        _parser().parse_args(argv)
    except UserError as e:
        # An inline mention may name a command without its required flags; never an unknown one.
        if not (inline and re.search(r"the following arguments are required|one of the arguments .* is required", str(e))):
            raise AssertionError(f"documented command does not parse: {' '.join(argv)}: {e}") from e


@pytest.mark.parametrize(("argv", "shown"), shown_outputs())
def test_documented_output_matches(argv, shown, tmp_path):
    argv = list(argv)
    documented_out = None
    if "--out" in argv:  # never overwrite a committed file: write to tmp, print the documented path
        k = argv.index("--out") + 1
        documented_out, argv[k] = argv[k], str(tmp_path / "fit.json")
    buf, err = io.StringIO(), io.StringIO()
    with redirect_stdout(buf), redirect_stderr(err):
        rc = main(argv)
    if shown and shown[0].startswith("depthwidth: error:"):  # a documented refusal: one line, exit 2
        assert rc == 2 and buf.getvalue() == "", (rc, buf.getvalue())
        assert err.getvalue().rstrip("\n") == shown[0].rstrip() and len(shown) == 1
        return
    assert rc == 0, err.getvalue()
    got = buf.getvalue()
    if documented_out:
        got = got.replace(str(tmp_path / "fit.json"), documented_out)
    got_lines = [x.rstrip() for x in got.rstrip("\n").split("\n")]
    shown = [x.rstrip() for x in shown]
    while shown and not shown[-1]:
        shown.pop()
    assert len(got_lines) == len(shown), "\n".join(got_lines)
    for g, s in zip(got_lines, shown):
        if "..." in s:  # a shortened line: the part before "..." must match
            assert g.startswith(s.split("...")[0].rstrip(", ")), (g, s)
        else:
            assert g == s


def test_readme_is_short_and_its_links_exist():
    text = (REPO / "README.md").read_text()
    assert len(text.split("\n")) <= 150
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (REPO / target).exists(), target
    assert "./dw fit --results results/law-long --out" in text  # quick start 1: the law, training nothing


def test_the_readme_result_table_is_the_committed_fits():
    """README "The result": each row's N*, interval, d_x and crossing share are the committed fit's
    (fitted pairs: the six-seed table; predicted pairs: their own directories), and the (5,10)
    row says "running" exactly until its forms verdict file is committed, then its outcome."""
    import json

    from depthwidth.units import format_count

    rows = {}
    for line in (REPO / "README.md").read_text().splitlines():
        m = re.match(r"^\| \((\d+), (\d+)\) \| (.*) \|$", line)
        if m:
            rows[(int(m[1]), int(m[2]))] = [c.strip() for c in m[3].split(" | ")]
    src = {(1, 2): "law-long-seeds/fit-6seeds.json", (2, 4): "law-long-seeds/fit-6seeds.json",
           (4, 8): "law-long-seeds/fit-6seeds.json", (3, 6): "predict-36/fit.json", (2, 3): "predict-23/fit.json"}
    assert set(rows) == {*src, (5, 10)}
    for pair, rel in src.items():
        fit = json.loads((REPO / "results" / rel).read_text())
        p = next(q for q in fit["points"] + fit["not_fitted"] if (q["L_s"], q["L_d"]) == pair)
        lo, hi = p["N_star_ci95"]
        n_star, d_x, share = rows[pair][:3]
        assert n_star.startswith(f"{format_count(p['N_star'])} [{format_count(lo)}, "), (pair, n_star)
        assert n_star.endswith(f"> {format_count(p['N_range'][1])}]" if hi is None else f"{format_count(hi)}]")
        assert d_x == f"{p['d_x']:.1f}" and share.startswith(f"{100 * p['bootstrap_fraction']:.1f} %".replace(".0 %", " %"))
    verdict = REPO / "results/predictions/verdicts/forms-510.predict-510.json"
    if not verdict.is_file():
        assert rows[(5, 10)][0] == "running" and rows[(5, 10)][-1] == "pending"
    else:  # the verdict is in: the row gives the measured N* (or the outcome) and no longer "running"
        (r,) = json.loads(verdict.read_text())["verdicts"]
        m = r.get("measured") or {}
        assert rows[(5, 10)][0] != "running" and rows[(5, 10)][-1] != "pending"
        assert (rows[(5, 10)][0].startswith(format_count(m["N_star"])) if r["outcome"] == "resolved"
                else r["outcome"].replace("_", " ") in " ".join(rows[(5, 10)]))


def test_no_file_cites_a_document_outside_the_repository():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    token = "DE" + "SIGN"  # spelled so that this file does not cite it either
    hits = [f for f in files if f.endswith((".py", ".md", ".toml", ".sh", ".yml"))
            and token + " §" in (REPO / f).read_text(errors="replace")]
    assert not hits, hits


def test_generated_tables_hold_the_stored_values():
    gen = _gen()
    cells = gen.cells("results/law-long")
    assert "| ~11.6K | **1.587 ± 0.005** (d32) | 1.610 ± 0.002 (d22) | – | – |" in cells
    assert "**1.198 ± 0.003** (d64)" in cells
    tr = gen.transitions("results/law-long/fit.json")
    assert "| (1, 2) | **13.8K** [13K, 14.2K] | 100.0 % | 28.5 at 1.41 (0.011) | 473K (d_x 167) |" in tr
    assert "| (4, 8) | **253K** [115K, 362K] | 99.8 % |" in tr
    law = gen.law("results/law-long/fit.json")
    assert "0.184 [0.114, 0.254] | 0.84 | yes | yes |" in law
    cpu = gen.transitions("results/cpu/fit.json")
    assert "| (2, 4) | none in 102K–406K:" in cpu and "| 0.0 % |" in cpu
    assert "holds no law" in gen.law("results/cpu/fit.json")
    pred = gen.predictions("results/predictions/law-long.json")
    assert "| (3, 6) | 4.24 | **118K** | [79.3K, 175K] | [76.9K, 180K] | 48.1 |" in pred
    est = gen.estimators("results/law-long/estimators.json")
    assert "| pooled bootstrap | 0.393 | [0.004, 0.781] | contains | excludes | (1,2) 99.0%, (2,4) 95.4%, (4,8) 79.3% |" in est
    assert "seed 0: b 0.197; seed 1: b 0.110; seed 2: b 0.157" in est
    assert "*the interval excludes ln 3*: holds in every row." in est


def test_generated_verdict_counts_records_then_judges(tmp_path, monkeypatch):
    import json
    import shutil

    gen = _gen()
    monkeypatch.setattr(gen, "REPO", tmp_path)
    (tmp_path / "p").mkdir()
    shutil.copy(REPO / "results/predictions/law-long.json", tmp_path / "p/pred.json")
    assert gen.verdict("p/pred.json predict-36 r") == \
        "`predict-36`: records for 0 of its 24 grid runs in `r`; no fit yet, so no verdict."
    pred = json.loads((tmp_path / "p/pred.json").read_text())["predictions"][0]
    (tmp_path / "r").mkdir()
    (tmp_path / "r/fit.json").write_text(json.dumps({
        "format": "depthwidth-fit", "version": 1, "options": {"assign": "geom"},
        "points": [{"L_s": 3, "L_d": 6, "status": "crossing", "N_star": 2 * pred["n_star"], "sigma_ln_N_star": 0.1,
                    "N_star_ci95": [1.5 * pred["n_star"], 2.5 * pred["n_star"]], "bootstrap_fraction": 1.0}]}))
    out = gen.verdict("p/pred.json predict-36 r")
    assert "| (3, 6) | 118K [79.3K, 175K] | 235K [176K, 294K] | 100.0 % | ×2.00 |" in out
    # the pair this directory did not train gets no row (it read like a failed verdict)
    assert "outside the predicted interval" in out and "| (2, 3) |" not in out and "not resolved" not in out
    # sigma 0.1 against the lower arm's ln 2/1.5 / 1.96 = 0.147: within 1.5x, so no "far from normal"
    z_arm = math.log(2) / math.hypot(pred["sigma_ln_n_star"], math.log(2 / 1.5) / 1.959963984540054)
    assert f"| {math.log(2) / math.hypot(pred['sigma_ln_n_star'], 0.1):+.2f} | {z_arm:+.2f} |" in out
    # a grid run's record and one outside the grid (a refinement round's) are counted apart
    from depthwidth.experiments.presets import load_preset

    for rid in (load_preset("predict-36").runs[0].run_id(), "L3-d76-h2-s0-refined"):
        (tmp_path / "r/runs" / rid).mkdir(parents=True)
        (tmp_path / "r/runs" / rid / "record.json").write_text("{}")
    assert gen.progress("predict-36 r") == "`predict-36`: records for 1 of its 24 grid runs and 1 refinement run in `r`"


def test_generated_forms_verdict_reads_the_committed_verdict_file(tmp_path, monkeypatch, capsys):
    """The (5,10) block shows the verdict file as written by predict --check (here on a made-up
    measured point), says which step is missing before it exists, and fails on a stale file."""
    import json
    import shutil

    from depthwidth.cli import main
    from depthwidth.errors import UserError

    gen = _gen()
    monkeypatch.setattr(gen, "REPO", tmp_path)
    monkeypatch.chdir(tmp_path)
    pred, fit, vf = ("results/predictions/forms-510.json", "results/predict-510/fit.json",
                     "results/predictions/verdicts/forms-510.predict-510.json")
    (tmp_path / "results/predictions/verdicts").mkdir(parents=True)
    shutil.copy(REPO / pred, tmp_path / pred)
    arg = f"{vf} predict-510 results/predict-510"
    assert gen.forms_verdict(arg) == ("`predict-510`: records for 0 of its 24 grid runs in `results/predict-510`; "
                                      "no fit yet, so no verdict.")
    (tmp_path / fit).parent.mkdir(parents=True)
    (tmp_path / fit).write_text(json.dumps({"points": [{
        "L_s": 5, "L_d": 10, "status": "crossing", "N_star": 250e3, "ln_N_star": math.log(250e3),
        "N_star_ci95": [180e3, 340e3], "sigma_ln_N_star": 0.2, "bootstrap_fraction": 0.99,
        "N_range": [156e3, 1.73e6]}], "not_fitted": [], "no_crossing": []}))
    assert gen.forms_verdict(arg).endswith(f"no verdict file yet (`predict --check ... --fit {fit} --out {vf}`).")
    assert main(["predict", "--check", pred, "--fit", fit, "--out", vf]) == 0
    capsys.readouterr()
    rows = json.loads((tmp_path / vf).read_text())["verdicts"][0]["forms"]
    out = gen.forms_verdict(arg)
    assert "(5, 10): **resolved**, measured N* 250K, favoured: **saturating**" in out
    for r in rows:  # every form's row, as the file holds it
        assert f"| {r['form']} | {r['z']:+.2f} | {r['status']} | {r['updated_weight']:.3f} |" in out
    (tmp_path / fit).write_text((tmp_path / fit).read_text() + "\n")
    with pytest.raises(UserError, match="measured fit results/predict-510/fit.json has changed since the verdict"):
        gen.forms_verdict(arg)
    (tmp_path / fit).unlink()
    with pytest.raises(UserError, match="measured fit results/predict-510/fit.json cannot be read under"):
        gen.forms_verdict(arg)


def test_generated_layout_lists_every_module_and_the_reference_every_command():
    gen = _gen()
    layout = gen.layout()
    for path in (REPO / "depthwidth").rglob("*.py"):
        assert f"`{path.relative_to(REPO)}`" in layout
    ref = gen.cli_reference()
    for name in ("depthwidth fit", "depthwidth query", "depthwidth sweep", "depthwidth exp band",
                 "depthwidth theory seprank", "depthwidth predict"):
        assert f"`{name}`" in ref, name
    assert "--ray-hosts-per-run" in ref and "--tune-lr" in ref


def test_every_marker_in_the_docs_expands():
    gen = _gen()
    for path in DOCS:
        text = path.read_text()
        out = gen.expand(text)
        assert "<!-- gen:" not in out, path
        for img in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", out):
            if "assets/results/" in img:  # served from results/*/figures by the hook
                assert (REPO / img.split("assets/", 1)[1]).exists(), (path, img)


def test_the_fault_table_names_tests_that_exist():
    import ast

    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", (REPO / "docs" / "guide" / "faults.md").read_text())
    assert len(named) >= 20
    for path, name in named:
        tree = ast.parse((REPO / path).read_text())
        assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, f"{path}::{name}"
