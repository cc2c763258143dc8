"""Helpers for the classroom browser tests: reading a lab page's state, choosing
a new value for a control, checking contrast, palette and origins."""

from __future__ import annotations

import json
import math
from urllib.error import HTTPError
from urllib.parse import urlparse
from urllib.request import Request, urlopen

import pytest

from tests.browser.conftest import ARTIFACTS
from tests.browser.ui import record, wait_for_render

VIEWPORT = {"width": 1280, "height": 720}


@pytest.fixture(scope="module")
def shared_context(browser):
    """One browser context for a test module: plotly.js (4.8 MB) is fetched and compiled once, not per test.
    Lab state lives in the URL, so tests do not leak into each other through it."""
    context = browser.new_context(viewport=VIEWPORT)
    yield context
    context.close()


@pytest.fixture
def tab(shared_context, page_log, request):
    """A fresh 1280x720 page in the module's context; requests and console errors go to ``page_log``,
    a screenshot of the final view to test-artifacts/<test>.png."""
    page = shared_context.new_page()
    record(page, page_log)
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        page.screenshot(path=ARTIFACTS / f"{request.node.name}.png")
    finally:
        page.close()

# Okabe & Ito, "Color Universal Design" (2008): the palette labs/theme.py uses.
OKABE_ITO = {"#000000", "#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7"}

# Relative luminance and contrast ratio exactly as WCAG 2.x defines them (1.4.3: 4.5:1 for text,
# 3:1 for large text, i.e. >= 24 px, or >= 18.66 px bold). Text inside SVG (the plots) is checked
# against white, the paper colour of every figure.
CONTRAST_JS = """
async () => {
  // Colours are read once CSS transitions (a pressed button fading to its new colours) have ended.
  await Promise.all(document.getAnimations().map((a) => a.finished.catch(() => null)));
  const parse = (c) => {
    const m = c && c.match(/rgba?\\(([^)]+)\\)/);
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return { r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1 };
  };
  const lum = ({ r, g, b }) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const background = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c.a > 0.5) return c;
    }
    return { r: 255, g: 255, b: 255 };
  };
  const bad = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const node = walker.currentNode;
    const text = node.textContent.trim();
    if (!text) continue;
    const el = node.parentElement;
    const box = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    if (!box.width || !box.height || cs.visibility === "hidden" || Number(cs.opacity) === 0) continue;
    if (el.closest("button:disabled")) continue;  // WCAG 1.4.3 exempts inactive controls
    const inSvg = el.closest("svg");
    const fg = parse(inSvg ? cs.fill : cs.color);
    if (!fg || fg.a === 0 || (inSvg && Number(cs.fillOpacity) === 0)) continue;
    const bg = inSvg ? { r: 255, g: 255, b: 255 } : background(el);
    const [hi, lo] = [lum(fg), lum(bg)].sort((a, b) => b - a);
    const ratio = (hi + 0.05) / (lo + 0.05);
    const size = parseFloat(cs.fontSize);
    const large = size >= 24 || (Number(cs.fontWeight) >= 700 && size >= 18.66);
    if (ratio < (large ? 3 : 4.5)) bad.push(`${text.slice(0, 50)} (${ratio.toFixed(2)}:1)`);
  }
  return bad;
}
"""

FIGURES_JS = "() => JSON.stringify(window.pdlab.lastResult().figures)"


def open_lab(page, base: str, slug: str, query: str = "") -> int:
    """Open a lab page and wait for its first render; returns the render count (1)."""
    page.goto(f"{base}/labs/{slug}{'?' + query if query else ''}")
    return wait_for_render(page, 0)


def wait_settled(page, previous: int, timeout_ms: int = 15000) -> int:
    """Wait until the page re-rendered after ``previous`` renders and what is drawn is the
    answer for the controls' current state (no request still on its way); returns the render count."""
    page.wait_for_function(
        """n => {
            const count = Number(document.getElementById('figures').dataset.renderCount || 0);
            const drawn = window.pdlab && window.pdlab.lastResult();
            if (count <= n || !drawn) return false;
            const state = window.pdlab.getState();
            return Object.keys(state).every(k => JSON.stringify(state[k]) === JSON.stringify(drawn.params[k]));
        }""",
        arg=previous, timeout=timeout_ms,
    )
    return int(page.eval_on_selector("#figures", "el => el.dataset.renderCount"))


def figures_json(page) -> str:
    """The figures of the answer now drawn, as the server sent them (JSON text)."""
    return page.evaluate(FIGURES_JS)


def control_values(page) -> dict[str, str]:
    """Every visible control's value, as its input shows it."""
    return page.evaluate(
        """() => Object.fromEntries([...document.querySelectorAll('.control[data-param]')]
             .map(c => [c.dataset.param, document.getElementById('in-' + c.dataset.param).value]))"""
    )


def foreign_requests(page_log, base: str) -> list[str]:
    """Requests the page made to any origin other than the server's."""
    origin = urlparse(base).netloc
    return [u for u in page_log.requests if urlparse(u).scheme not in ("data", "blob") and urlparse(u).netloc != origin]


def contrast_failures(page) -> list[str]:
    """Visible text below the WCAG 1.4.3 contrast minimum."""
    return page.evaluate(CONTRAST_JS)


def shown_value(p: dict, value) -> str:
    """How a value appears in the control's input (what ``String(value)`` gives in JavaScript; empty for null)."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def expected_table_rows(fig: dict) -> int:
    """Rows the data tables of a figure hold (static/js/lab/figures.js): a point a row, a series of more
    than 50 points in one row, a grid in one row, a table trace row for row."""
    rows = 0
    for trace in fig["data"]:
        if trace.get("type") == "table":
            rows += max((len(c) for c in trace.get("cells", {}).get("values", [])), default=0)
        elif "z" in trace:
            rows += 1
        elif "values" in trace and "labels" in trace:
            rows += len(trace["labels"])
        else:
            n = max(len(trace.get("x") or []), len(trace.get("y") or []))
            rows += 1 if n > 50 else n
    return rows


def status_of(url: str, body: dict | None = None) -> int:
    """HTTP status of a GET (or a JSON POST when ``body`` is given)."""
    request = Request(url, data=None if body is None else json.dumps(body).encode(),
                      headers={"Content-Type": "application/json"})
    try:
        with urlopen(request) as response:
            return response.status
    except HTTPError as err:
        return err.code


def ladder(p: dict) -> list[float]:
    """The 1-2-5 values between a log param's bounds, with the bounds (static/js/lab/slider.js)."""
    lo = max(1 if p["min"] is None else p["min"], 1 if p["type"] == "integer" else 1e-6)
    values = {p["min"], p["max"]}
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(p["max"])) + 1):
        for m in (1, 2, 5):
            v = float(f"{m * 10 ** k:.12g}")
            if p["min"] <= v <= p["max"] and (p["type"] != "integer" or v.is_integer()):
                values.add(v)
    return sorted(values)


def two_keys(p: dict) -> tuple[str, float]:
    """Two presses of one arrow key on a log slider: the key, and the value it leads to from the default
    (up the ladder, or down from the maximum). A default of None ("auto") counts as 0, as in the page."""
    start = 0 if p["default"] is None else p["default"]
    steps = ladder(p)
    if start < p["max"]:
        up = [v for v in steps if v > start]
        return "ArrowRight", up[min(1, len(up) - 1)]
    down = [v for v in steps if v < start]
    return "ArrowLeft", down[max(-2, -len(down))]


def new_value(p: dict):
    """A valid value for param ``p`` that differs from its default, well inside its bounds.

    Selects take the first other choice. Numbers move 40 % of the way from the default towards the
    maximum (towards the minimum when the default is the maximum), in the slider's own scale.
    """
    default = p["default"]
    if p["choices"]:
        return next(c["value"] for c in p["choices"] if c["value"] != default)
    lo, hi = p["min"], p["max"]
    if default is None:  # "auto": the middle of the range
        default = lo
    target = hi if default < hi else lo
    if p["scale"] == "log":
        a, b = math.log(max(default, 1)), math.log(max(target, 1))
        value = math.exp(a + 0.4 * (b - a))
    else:
        value = default + 0.4 * (target - default)
    if p["type"] == "integer":
        value = round(value)
        if value == default:
            value = default + (1 if target > default else -1)
    elif p.get("step"):
        value = round(round(value / p["step"]) * p["step"], 10)
    return value


def colours_of(figures: dict) -> set[str]:
    """Every trace colour named in the figures (line, marker, fill), lower-case hex or rgb()."""
    found: set[str] = set()
    for fig in figures.values():
        for trace in fig["data"]:
            for key in ("line", "marker"):
                colour = (trace.get(key) or {}).get("color")
                if isinstance(colour, str):
                    found.add(colour.lower())
                elif isinstance(colour, list):
                    found.update(c.lower() for c in colour if isinstance(c, str))
            if isinstance(trace.get("fillcolor"), str):
                found.add(trace["fillcolor"].lower())
    return found


def is_safe_colour(colour: str) -> bool:
    """An Okabe-Ito colour, a grey (r = g = b) or white, at any opacity."""
    colour = colour.replace(" ", "")
    if colour.startswith("#"):
        hexpart = colour[1:7] if len(colour) >= 7 else "".join(ch * 2 for ch in colour[1:4])
        rgb = tuple(int(hexpart[i:i + 2], 16) for i in (0, 2, 4))
    elif colour.startswith("rgb"):
        rgb = tuple(int(float(v)) for v in colour[colour.index("(") + 1:-1].split(",")[:3])
    else:
        return False
    return "#%02x%02x%02x" % rgb in OKABE_ITO or rgb[0] == rgb[1] == rgb[2]


def body_of(download) -> bytes:
    """The bytes of a Playwright download."""
    with open(download.path(), "rb") as f:
        return f.read()


def lab_schema(page, base: str, slug: str) -> dict:
    """The lab's entry in GET /api/labs."""
    labs = json.loads(page.request.get(f"{base}/api/labs").text())
    return next(lab for lab in labs if lab["slug"] == slug)
