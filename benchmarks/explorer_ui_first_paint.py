"""neuron-explorer: first paint of the device trace of a million-instruction profile in headless
Chromium (target: under 3 s), against a one-execution profile in the same run.

Each measurement starts a fresh server (nothing indexed yet) and a fresh page, opens the device
trace view and reads the time from navigation start to the chart's first finished render
(``performance.mark('device-trace-painted')``). Needs Debian's chromium (apt install chromium).

    python benchmarks/explorer_ui_first_paint.py [--instructions 1000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from _explorer_trace import synthetic_session
from _harness import report
from neuron_explorer import open_profile
from neuron_explorer.server import Explorer, ExplorerServer
from playwright.sync_api import sync_playwright

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def first_paint_ms(browser, profile) -> float:
    server = ExplorerServer(Explorer([profile]), port=0).start()
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(server.url + "#/device?p=0")
        page.wait_for_function("document.body.dataset.devicePainted === '1'", timeout=120_000)
        ms = page.evaluate("performance.getEntriesByName('device-trace-painted')[0].startTime")
        page.close()
        return ms
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instructions", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="explorer-ui-bench-")
    try:
        big_session, rows, _ = synthetic_session(os.path.join(work, "big"), args.instructions)
        small_session, small_rows, _ = synthetic_session(os.path.join(work, "small"), 1)
        big, small = open_profile(big_session), open_profile(small_session)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            big_ms = min(first_paint_ms(browser, big) for _ in range(args.repeats))
            small_ms = min(first_paint_ms(browser, small) for _ in range(args.repeats))
            browser.close()
        print(f"{rows:,} vs {small_rows:,} instructions; load average {os.getloadavg()[0]:.1f}")
        report("explorer UI first paint, device trace", f"{big_ms / 1000:.2f} s", big_ms / small_ms,
               f"{small_rows:,}-instruction profile ({small_ms / 1000:.2f} s)", "< 3 s")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
