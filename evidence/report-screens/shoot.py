"""The first viewport of committed reports, as a person sees them: python evidence/report-screens/shoot.py [NAME...]
(every report, or those named).

Headless Chromium (Debian's), driven by Playwright, at a desktop's 1366x900 and a phone's 390x844.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

HERE = Path(__file__).resolve().parent
REPORTS = {"h200-shrunk-fifth-run": HERE.parent / "h200-shrunk" / "fifth-run" / "report" / "report.html",
           "h200-positive": HERE.parent / "h200-positive" / "report" / "report.html",
           "h200-fork": HERE.parent / "h200-fork" / "report" / "report.html",
           "fork-port": HERE.parent / "fork-port" / "report" / "report.html"}  # fmt: skip
SIZES = ((1366, 900), (390, 844))


def main() -> None:
    named = sys.argv[1:] or list(REPORTS)
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        for name, page_file in ((n, REPORTS[n]) for n in named):
            for width, height in SIZES:
                page = browser.new_page(viewport={"width": width, "height": height})
                page.goto(page_file.as_uri())
                page.screenshot(path=str(HERE / f"{name}-{width}x{height}.png"))
                page.close()
        browser.close()


if __name__ == "__main__":
    main()
