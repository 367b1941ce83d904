"""`/docs` renders in a real browser with no network (issue #9): headless Chromium, started
with every background connection off, loads Swagger UI from the server alone and shows the
API's operations. Needs Debian's `chromium`; skipped where it is not installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from server_harness import Server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_docs_render_in_headless_chromium(tmp_path: Path) -> None:
    s = Server(tmp_path / "data").start()
    try:
        out = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             # every host but loopback (bypassed by default) goes to a closed port: no CDN
             "--proxy-server=127.0.0.1:9",
             "--virtual-time-budget=10000", "--dump-dom", f"{s.url}/docs"],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        s.stop()
    dom = out.stdout
    # Swagger UI built the page: one operation block per path, the spec's title
    for path in ("/health", "/sql", "/query", "/views"):
        assert f'data-path="{path}"' in dom, dom[:2000]
    assert "opblock" in dom and "diffsql" in dom
