"""Open every page of a built MkDocs site in headless Chromium and fail on what a reader would see broken.

Run by ``.ci/site-check`` (which builds the site first)::

    python .ci/site_check.py SITE_DIR OUT_DIR [--chromium BIN]

The site is served from SITE_DIR over HTTP on 127.0.0.1 (a free port, stopped at the end), and
Chromium is driven with the Chrome DevTools Protocol over ``--remote-debugging-pipe`` (JSON
messages ending in a NUL byte on file descriptors 3 and 4), so only the standard library is
needed. For every ``*.html`` page under SITE_DIR (``404.html`` excepted) it checks:

- the page loads: the navigation has no error and the document's HTTP status is 200, and no
  same-site resource it loads (image, script, style sheet, font) fails or answers >= 400;
- every ``<img>`` decodes (``naturalWidth > 0`` once loading settled);
- no console errors: ``Runtime.consoleAPICalled`` of type error, ``Runtime.exceptionThrown``, or
  ``Log.entryAdded`` of level error. Hosts other than 127.0.0.1 do not resolve in the browser, so
  the check needs no internet and never waits on it; the loads from other sites this blocks (the
  theme's web fonts) are counted and reported, not failed;
- no broken internal link: every same-site ``href`` resolves to a file under SITE_DIR (a
  directory to its ``index.html``), and a ``#fragment`` to an ``id`` (or ``<a name>``) in it;
- at a 1280 px wide window, no code block or table is wider than its box (it would hide behind
  a horizontal scrollbar); the CLI reference (``cli/``, ``--help`` texts at 88 columns) too.

Screenshots at 1280 px go to OUT_DIR: ``landing.png`` (the landing page, the CI artefact) and
one per page named in ``--shots``. Each problem is printed on one line; the exit code is 1 if
there is any, 0 otherwise.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import functools
import html.parser
import http.server
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from pathlib import Path

WIDTH, HEIGHT = 1280, 800
TIMEOUT_S = 30.0

# Evaluated in each page once its load event fired: waits for every <img> to settle, then
# reports the images that did not decode, every link, and the boxes wider than their frame.
PAGE_PROBE = r"""
(async () => {
  const imgs = Array.from(document.images);
  await Promise.all(imgs.map(i => i.complete ? null :
    new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); })));
  const bad = imgs.filter(i => !(i.naturalWidth > 0)).map(i => i.currentSrc || i.src);
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  const boxes = Array.from(document.querySelectorAll('article pre > code, article .md-typeset__scrollwrap'));
  const overflow = boxes.filter(b => b.offsetParent !== null && b.scrollWidth > b.clientWidth + 1)
    .map(b => {
      const h = b.closest('article').querySelectorAll('h1, h2, h3');
      let heading = '';
      for (const x of h) { if (x.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING) heading = x.id; }
      return `${b.tagName.toLowerCase()} under #${heading}: ${b.scrollWidth}px of content in ${b.clientWidth}px`;
    });
  // lines that wrap (extra.css sets pre-wrap): how wide each code block would be unwrapped
  const wrapped = Array.from(document.querySelectorAll('article pre > code')).filter(c => {
    const old = c.style.whiteSpace; c.style.whiteSpace = 'pre';
    const wide = c.scrollWidth > c.clientWidth + 1; c.style.whiteSpace = old; return wide;
  }).length;
  return {images: imgs.length, bad, links, overflow, wrapped};
})()
"""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # the responses are checked through the browser instead
        pass


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """Serve SITE on 127.0.0.1 at a free port (port 0: the kernel picks it); returns (server, base URL)."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class Browser:
    """Headless Chromium with one page, driven over the DevTools pipe (fd 3 in, fd 4 out)."""

    def __init__(self, binary: str, profile: str):
        to_chrome_r, self._w = os.pipe()
        self._r, from_chrome_w = os.pipe()
        # fds 3 and 4 in the child: its DevTools pipe ends (--remote-debugging-pipe). Moved above
        # 10 first so that neither dup2 overwrites the other's source.
        def child_fds():
            high_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)
        args = [binary, "--headless=new", "--remote-debugging-pipe", "--no-first-run",
                "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--hide-scrollbars", f"--window-size={WIDTH},{HEIGHT}",
                # hermetic: every host but 127.0.0.1 fails at once (no wait on a firewalled CI
                # machine for the theme's web fonts, whose failure is counted, not failed)
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                f"--user-data-dir={profile}", "about:blank"]
        if os.geteuid() == 0:  # Chromium refuses to run as root with its sandbox (CI runs as root)
            args.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(args, preexec_fn=child_fds, pass_fds=(3, 4),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._r, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.proc.poll()})")
            self._buf += chunk
        msg, _, self._buf = self._buf.partition(b"\0")
        return json.loads(msg)

    def call(self, method: str, session: bool = False, **params) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            self.events.append(reply)

    def page(self, method: str, **params) -> dict:
        return self.call(method, session=True, **params)

    def wait_for(self, event: str) -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == event for e in self.events):
            self.events.append(self._read(deadline))

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class _Targets(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if value and (key == "id" or (tag == "a" and key == "name")):
                self.ids.add(value)


@functools.lru_cache(maxsize=None)
def anchors(path: Path) -> frozenset[str]:
    parser = _Targets()
    parser.feed(path.read_text(errors="replace"))
    return frozenset(parser.ids)


def link_problem(site: Path, base: str, href: str) -> str | None:
    """Why a same-site HREF is broken (no file, or no element with its fragment's id), or None."""
    url = urllib.parse.urlsplit(href)
    path = site / urllib.parse.unquote(url.path).lstrip("/")
    if path.is_dir():
        path = path / "index.html"
    if not path.is_file():
        return f"no file {path.relative_to(site)}"
    frag = urllib.parse.unquote(url.fragment)
    if frag and path.suffix == ".html" and frag not in anchors(path):
        return f"no id '{frag}' in {path.relative_to(site)}"
    return None


def problems_in_events(events: list[dict], base: str, doc_url: str) -> tuple[list[str], int]:
    """(problems, count of failed loads from other sites) from the DevTools events of one page."""
    out, external = [], 0
    requests = {}
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Network.requestWillBeSent":
            requests[p["requestId"]] = p["request"]["url"]
        elif m == "Network.responseReceived":
            url, status = p["response"]["url"], p["response"]["status"]
            if url.startswith(base) and status >= 400:
                out.append(f"HTTP {status} for {url}")
        elif m == "Network.loadingFailed":
            url = requests.get(p["requestId"], "?")
            if url.startswith(base):
                out.append(f"failed to load {url}: {p.get('errorText')}")
            else:
                external += 1
        elif m == "Runtime.consoleAPICalled" and p.get("type") == "error":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            out.append(f"console.error: {text}")
        elif m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append(f"uncaught exception: {d.get('exception', {}).get('description', d.get('text'))}")
        elif m == "Log.entryAdded" and p["entry"].get("level") == "error":
            entry = p["entry"]
            if entry.get("source") == "network" and not entry.get("url", base).startswith(base):
                continue  # counted as a failed external load above
            out.append(f"console ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}".rstrip())
    return out, external


def check_page(browser: Browser, site: Path, base: str, rel: str, shot: Path | None) -> tuple:
    """(problems, overflowing boxes, failed external loads, wrapped code blocks, images) of the
    page at REL; a screenshot of it to SHOT."""
    url = base + rel
    browser.events.clear()
    nav = browser.page("Page.navigate", url=url)
    if nav.get("errorText"):
        return [f"navigation error: {nav['errorText']}"], [], 0, 0, 0
    browser.wait_for("Page.loadEventFired")
    probe = browser.page("Runtime.evaluate", expression=PAGE_PROBE, awaitPromise=True, returnByValue=True)
    if "exceptionDetails" in probe:
        return [f"probe failed: {probe['exceptionDetails'].get('text')}"], [], 0, 0, 0
    found = probe["result"]["value"]
    time.sleep(0.2)  # console messages of late scripts (search worker) arrive after load
    browser.page("Runtime.evaluate", expression="1")
    problems, external = problems_in_events(browser.events, base, url)
    doc = [e for e in browser.events if e.get("method") == "Network.responseReceived"
           and e["params"].get("type") == "Document"]
    if not doc or doc[0]["params"]["response"]["status"] != 200:
        problems.append(f"document status {doc[0]['params']['response']['status'] if doc else 'missing'}")
    problems += [f"image does not decode: {src}" for src in found["bad"]]
    for href in sorted(set(found["links"])):
        if href.startswith(base):
            why = link_problem(site, base, href)
            if why:
                problems.append(f"broken link {href[len(base) - 1:]}: {why}")
    if shot is not None:
        # the landing page as a reader first sees it; another page from its first code block on
        # (where the wide command output is), a window's height of it
        top = 0 if rel == "" else browser.page("Runtime.evaluate", returnByValue=True, expression=(
            "(() => { const p = document.querySelector('article pre');"
            " return p ? Math.max(0, p.getBoundingClientRect().top + window.scrollY - 40) : 0; })()"))["result"]["value"]
        clip = {"x": 0, "y": top, "width": WIDTH, "height": HEIGHT, "scale": 1}
        data = browser.page("Page.captureScreenshot", format="png", clip=clip, captureBeyondViewport=True)["data"]
        shot.write_bytes(base64.b64decode(data))
    return problems, found["overflow"], external, found["wrapped"], found["images"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("site", type=Path, help="the built site (mkdocs build --site-dir)")
    ap.add_argument("out", type=Path, help="where the screenshots go")
    ap.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    ap.add_argument("--shots", default="", help="comma list of pages (e.g. guide/query/) to screenshot too")
    args = ap.parse_args(argv)
    site = args.site.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    pages = sorted(str(p.relative_to(site)) for p in site.rglob("*.html") if p.name != "404.html")
    pages = [p[: -len("index.html")] if p.endswith("index.html") else p for p in pages]
    if "" not in pages:
        print(f"site-check: no index.html in {site}: not a built site")
        return 1
    shots = {"": args.out / "landing.png"}
    for name in filter(None, args.shots.split(",")):
        shots[name] = args.out / (name.strip("/").replace("/", "_") + ".png")
    server, base = serve(site)
    profile = tempfile.mkdtemp(prefix="site-check-chromium-")
    browser = Browser(args.chromium, profile)
    failed, external, images, wrapped = 0, 0, 0, []
    try:
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.page(f"{domain}.enable")
        browser.page("Emulation.setDeviceMetricsOverride", width=WIDTH, height=HEIGHT,
                     deviceScaleFactor=1, mobile=False)
        for rel in pages:
            try:
                problems, overflow, ext, wraps, imgs = check_page(browser, site, base, rel, shots.get(rel))
            except TimeoutError:  # the browser's state is unknown after this: stop here
                print(f"site-check: /{rel}: no load event or answer within {TIMEOUT_S:.0f} s; stopped")
                failed += 1
                break
            external += ext
            images += imgs
            if wraps:
                wrapped.append(f"/{rel} ({wraps})")
            for line in problems:  # one line each: a stack trace's lines joined
                print(f"site-check: /{rel}: {' '.join(line.split())}")
            for line in overflow:
                print(f"site-check: /{rel}: wider than the page at {WIDTH}px: {line}")
            failed += len(problems) + len(overflow)
    finally:
        browser.close()
        server.shutdown()
        shutil.rmtree(profile, ignore_errors=True)
    if wrapped:
        print(f"site-check: code blocks with lines wrapped at {WIDTH}px (not a problem): {', '.join(wrapped)}")
    print(f"site-check: {len(pages)} pages, {images} images, {failed} problems"
          + (f"; {external} loads from other sites blocked (not counted: the check needs no internet)" if external else ""))
    for rel, path in shots.items():
        if path.exists():
            print(f"site-check: screenshot of /{rel} at {WIDTH}px: {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
