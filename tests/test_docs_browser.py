"""The built docs site in a real browser (headless Chromium, driven through chromedriver's WebDriver HTTP API):
search works opened from disk (file://), and every page, at 1280 px and at a phone's 390 px, has no horizontal
overflow and no word broken mid-token; at 1280 px no table is clipped behind a scrollbar (on a phone a wide table
scrolls, its first column kept in view).

Skipped where Chromium or chromedriver is missing (Debian: ``apt-get install chromium chromium-driver``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.missing_tools import missing
from tests.paths import ROOT

pytestmark = [
    pytest.mark.processes,  # tests/costs.py: a browser and a site build
    pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver")),
                       reason=missing("no chromium and chromedriver (apt-get install chromium chromium-driver)")),
    pytest.mark.skipif(shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None,
                       reason=missing("the docs extra is not installed (pip install -e '.[docs]')")),
]

#: Characters after which a line may break inside a token: the site's break points (docs/hooks.py), and those a
#: browser breaks after by itself.
BREAKS_AFTER = "-/_.:,;=?&()[]{}"

#: For each text token of the content that spans two lines, where it broke: [token, the character before the break].
BROKEN_TOKENS = r"""
const out = [];
const walker = document.createTreeWalker(document.querySelector('.md-content'), NodeFilter.SHOW_TEXT);
let node;
while ((node = walker.nextNode())) {
  const pattern = /\S{4,}/g; let m;
  while ((m = pattern.exec(node.textContent))) {
    const range = document.createRange(); range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
    const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
    if (new Set(rects.map(r => Math.round(r.top))).size < 2) continue;
    const top = Math.round(rects[0].top);
    for (let k = 1; k < m[0].length; k++) {
      const one = document.createRange(); one.setStart(node, m.index + k); one.setEnd(node, m.index + k + 1);
      const rect = one.getClientRects()[0];
      if (rect && Math.round(rect.top) !== top) { out.push([m[0].slice(0, 60), m[0][k - 1]]); break; }
    }
  }
}
return out;
"""
#: Tables wider than the room they have: [its header, its width, the room].
CLIPPED_TABLES = r"""
return Array.from(document.querySelectorAll('.md-content table')).map(t => {
  const room = (t.closest('.md-typeset__scrollwrap') || t.parentElement).clientWidth;
  return [t.rows[0] ? t.rows[0].textContent.trim().replace(/\s+/g, ' ').slice(0, 50) : '', t.scrollWidth, room];
}).filter(([, width, room]) => width > room + 1);
"""


class _Browser:
    """One headless Chromium session through chromedriver (started on a free port, stopped by its own PID)."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.driver = subprocess.Popen(["chromedriver", f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except OSError:
                assert time.monotonic() < deadline, "chromedriver did not start"
                time.sleep(0.1)
        options = {"binary": shutil.which("chromium"),
                   "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900"]}
        session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": {"goog:chromeOptions": options}}})
        self.session = session["value"]["sessionId"]

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as answer:
            return json.loads(answer.read())

    def command(self, method: str, path: str, body: Any = None) -> Any:
        return self._call(method, f"/session/{self.session}{path}", body)["value"]

    def open(self, url: str, width: int) -> None:
        self.command("POST", "/window/rect", {"width": width, "height": 900})
        self.command("POST", "/url", {"url": url})

    def run(self, script: str) -> Any:
        return self.command("POST", "/execute/sync", {"script": script, "args": []})

    def close(self) -> None:
        try:
            self.command("DELETE", "")
        finally:
            self.driver.terminate()
            self.driver.wait(timeout=30)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run([str(Path(sys.executable).parent / "mkdocs"), "build", "--strict", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[_Browser]:
    opened = _Browser()
    try:
        yield opened
    finally:
        opened.close()


def test_search_works_on_the_site_opened_from_disk(site: Path, browser: _Browser) -> None:
    """The reported input: under file:// the search box only ever said "Initializing search"."""
    browser.open((site / "index.html").as_uri(), 1280)
    browser.run("const box = document.querySelector('input.md-search__input'); box.focus(); box.value = 'lease';"
                "box.dispatchEvent(new Event('input', {bubbles: true}));")
    deadline, found = time.monotonic() + 30, 0
    while time.monotonic() < deadline and not found:
        time.sleep(0.25)
        found = browser.run("return document.querySelectorAll('.md-search-result__item').length")
    meta = browser.run("return document.querySelector('.md-search-result__meta').textContent.trim()")
    assert found and "matching document" in meta, meta


@pytest.mark.parametrize("width", [1280, 390])
def test_no_page_overflows_or_breaks_a_word_mid_token(site: Path, browser: _Browser, width: int) -> None:
    """The reported input: on the stores page the comparison table's last column was clipped behind a scrollbar,
    and "ALREADY_EXISTS" broke into "ALREADY_EX ISTS"."""
    problems = []
    for page in sorted(site.rglob("*.html")):
        if page.name == "404.html":
            continue
        browser.open(page.as_uri(), width)
        name = page.relative_to(site).as_posix()
        overflow = browser.run("return document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if overflow > 0:
            problems.append(f"{name}: the page is {overflow} px wider than the window")
        problems += [f"{name}: {token!r} breaks after {before!r}" for token, before in browser.run(BROKEN_TOKENS)
                     if before not in BREAKS_AFTER]
        if width >= 1280:
            problems += [f"{name}: table {head!r} is {w} px in {room} px" for head, w, room in browser.run(CLIPPED_TABLES)]
    assert not problems, "\n".join(problems)
