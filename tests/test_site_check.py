"""The site check of CI (.ci/site_check.py, run by .ci/site-check): it finds what it says it finds.

A hand-made two-page site with one fault of each kind goes through the real check in headless
Chromium (skipped where Debian's ``chromium`` is not installed; CI installs it), and the link
resolution, which needs no browser, is tested on its own.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("site_check", REPO / ".ci" / "site_check.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["site_check"] = mod
    spec.loader.exec_module(mod)
    return mod


# a 1x1 PNG
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082")
HEAD = '<!doctype html><html><head><link rel="icon" href="data:,"></head>'
GOOD = HEAD + """<body><article><h1 id="top">ok</h1>
<img src="pic.png"><a href="page/#here">page</a><a href="#top">top</a></article></body></html>"""
GOOD_PAGE = HEAD + """<body><article><h1 id="here">ok</h1>
<img src="../pic.png"><a href="../#top">home</a><a href="#here">here</a></article></body></html>"""
# the code block scrolls as Material's do (display: block; overflow: auto), 400 columns wide
BAD = HEAD + """<body><article><h1 id="here">bad</h1>
<img src="../missing.png"><img src="data:image/png;base64,AAAA">
<a href="../nowhere/">x</a><a href="../#nope">y</a><a href="https://example.org/">outside</a>
<pre><code style="display: block; overflow: auto; white-space: pre">""" + "x" * 400 + """</code></pre>
<script>console.error("boom"); null.f();</script></article></body></html>"""


def _site(tmp_path: Path, page: str) -> Path:
    site = tmp_path / "site"
    (site / "page").mkdir(parents=True)
    (site / "index.html").write_text(GOOD)
    (site / "pic.png").write_bytes(PNG)
    (site / "page" / "index.html").write_text(page)
    return site


def test_links_resolve_to_files_and_anchors(tmp_path):
    sc = _module()
    site = _site(tmp_path, BAD)
    base = "http://127.0.0.1:1/"
    assert sc.link_problem(site, base, base + "page/#here") is None
    assert sc.link_problem(site, base, base + "pic.png") is None
    assert sc.link_problem(site, base, base + "nowhere/") == "no file nowhere"
    assert sc.link_problem(site, base, base + "#nope") == "no id 'nope' in index.html"


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (CI installs it)")
def test_every_fault_is_found_in_the_browser(tmp_path, capsys):
    sc = _module()
    assert sc.main([str(_site(tmp_path, GOOD_PAGE)), str(tmp_path / "ok")]) == 0
    assert (tmp_path / "ok" / "landing.png").read_bytes()[:8] == PNG[:8]
    capsys.readouterr()
    assert sc.main([str(_site(tmp_path / "b", BAD)), str(tmp_path / "shots")]) == 1
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("site-check: /page/: ")]
    found = sorted(x.split(": ", 2)[2].split(" http")[0].split(":")[0] for x in lines)
    assert found == sorted([
        "HTTP 404 for", "console (network)", "image does not decode", "image does not decode",
        "broken link /nowhere/", "broken link /#nope", "console.error", "uncaught exception",
        "wider than the page at 1280px"]), lines
