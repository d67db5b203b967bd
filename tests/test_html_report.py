"""`--format html` of fleet, compare and plan: one self-contained page (no scripts, nothing fetched), checked as
text, then opened in a real headless Chromium (Debian's `chromium` package; .ci/run installs it and sets
LLMSIZE_REQUIRE_BROWSER=1 so that a missing browser fails there instead of skipping): its DOM after parsing has
the tables and the charts, and its screenshot shows the charts' colours and the tables' text."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from llmsize.render.svg_chart import COLORS

CASES = {
    "fleet": ("fleet", "llama-3.1-70b", "--isl", "3000", "--osl", "500", "--users", "400", "--ttft", "2s",
              "--tok-s-per-user", "30", "--gpus", "h100-sxm,b200,rtx4090", "--format", "html"),
    "compare": ("compare", "llama-3.1-8b", "--gpus", "h100-sxm,rtx4090,b200", "--format", "html"),
    "plan": ("plan", "gemma-4-12b", "--gpu", "rtx5060ti", "--format", "html"),
}
# per page: (rows in its first table at least, <svg> charts)
EXPECT = {"fleet": (3, 2), "compare": (3, 1), "plan": (8, 2)}


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: dict[str, int] = {}
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        self.urls += [v for k, v in attrs if k in ("src", "href") and v]


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    from llmsize.cli import main

    out = {}
    d = tmp_path_factory.mktemp("html")
    for name, argv in CASES.items():
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            try:
                main(list(argv))
            except SystemExit as e:
                assert not e.code, (name, e.code)
        path = d / f"{name}.html"
        path.write_text(buf.getvalue(), encoding="utf-8")
        out[name] = path
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_the_page_is_self_contained(pages, name):
    text = pages[name].read_text(encoding="utf-8")
    p = _Tags()
    p.feed(text)
    assert text.startswith("<!DOCTYPE html>") and p.tags.get("html") == 1
    assert "script" not in p.tags and "link" not in p.tags and "img" not in p.tags and "iframe" not in p.tags
    assert p.urls == []  # nothing to fetch
    # the only address in the page is SVG's namespace name, which is never fetched
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) <= {"http://www.w3.org/2000/svg"}
    rows, charts = EXPECT[name]
    assert p.tags.get("svg") == charts and p.tags.get("tr", 0) >= rows + 1


def _chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None and os.environ.get("LLMSIZE_REQUIRE_BROWSER") == "1":
        pytest.fail("LLMSIZE_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
    return found


def _run(browser: str, tmp_path, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", list(CASES))
def test_a_headless_browser_renders_the_tables_and_charts(pages, name, tmp_path):
    browser = _chromium()
    if browser is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    url = pages[name].as_uri()
    dom = _run(browser, tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    p = _Tags()
    p.feed(dom.stdout)
    rows, charts = EXPECT[name]
    assert p.tags.get("svg") == charts and p.tags.get("table", 0) >= 1 and p.tags.get("tr", 0) >= rows + 1
    assert p.tags.get("polyline", 0) >= 1  # a chart has its lines once parsed

    Image = pytest.importorskip("PIL.Image")
    shot = tmp_path / f"{name}.png"
    r = _run(browser, tmp_path, "--window-size=1200,2400", "--hide-scrollbars", f"--screenshot={shot}", url)
    assert r.returncode == 0 and shot.exists(), r.stderr[-2000:]
    img = Image.open(shot).convert("RGB")
    assert img.size == (1200, 2400)
    counts = img.getcolors(img.size[0] * img.size[1])  # (pixels, colour) for each colour of the shot
    dark = sum(n for n, c in counts if max(c) < 80)  # the tables' and headings' text
    first = tuple(int(COLORS[0][i:i + 2], 16) for i in (1, 3, 5))
    chart = sum(n for n, c in counts if all(abs(c[i] - first[i]) <= 12 for i in range(3)))
    assert dark > 2000, dark
    assert chart > 400, chart  # above its legend swatch (144 px): a chart was drawn, not a blank box
