"""Screenshots of every lab at 1280x720, in normal and presentation mode, for the README.

Usage:
    .venv/bin/python scripts/screenshots.py                # every installed lab
    .venv/bin/python scripts/screenshots.py roofline --out /tmp/shots

Serves the app on a free loopback port and drives Debian's Chromium with the
same executable and flags as the browser tests (tests/browser/conftest.py),
then writes <out>/<slug>.png and <out>/<slug>-present.png (default out:
docs/screenshots). Nothing is fetched from another origin.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from labs import LABS  # noqa: E402
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from tests.browser.ui import serve  # noqa: E402

VIEWPORT = {"width": 1280, "height": 720}
RENDERED = "() => Number(document.getElementById('figures').dataset.renderCount || 0) > 0"


def main(argv: list[str] | None = None) -> int:
    """Write the screenshots; returns the exit status (2 for an unknown slug)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("slugs", nargs="*", help="labs to shoot (default: every installed lab)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    args = parser.parse_args(argv)
    unknown = [s for s in args.slugs if s not in LABS]
    if unknown:
        parser.error(f"unknown lab {', '.join(unknown)}; labs: {', '.join(LABS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    with serve() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=VIEWPORT)
        for slug in args.slugs or list(LABS):
            for suffix, query in (("", ""), ("-present", "?present=1")):
                page = context.new_page()
                page.goto(f"{base}/labs/{slug}{query}")
                page.wait_for_function(RENDERED, timeout=30000)
                path = args.out / f"{slug}{suffix}.png"
                page.screenshot(path=path)
                page.close()
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
