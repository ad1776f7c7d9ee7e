"""Headless Chromium for the rendering tests: load a page offline, read back DOM and requests.

How "no failed request" is proven (no CDP client needed):

* the browser runs with ``--proxy-server=127.0.0.1:9`` (nothing listens there), so any network
  request fails instead of leaving the machine;
* ``--log-net-log`` records every URL request the network stack starts. Requests made on the
  page's behalf carry the page's ``file://`` network isolation key; Chromium's own background
  traffic (update checks, account probes) carries none, so it is told apart reliably;
* the page must start no network request at all, so any page request is a failure; a control
  test feeds a page with one external image and checks that it is caught;
* file:// sub-resources do not go through the network stack, so the HTML itself is also checked
  statically to reference no resource at all (tests/render/test_render.py: assert_offline).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM: str | None = shutil.which("chromium") or (
    "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
)
SKIP_REASON = "headless Chromium not found (Debian package 'chromium'); browser checks skipped"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--hide-scrollbars",
    "--proxy-server=127.0.0.1:9",
]


@dataclass
class PageLoad:
    dom: str
    page_requests: list[str]
    screenshot: Path | None


def _net_events(path: Path) -> list[dict[str, Any]]:
    """NetLog events; tolerate a log whose closing brackets were not written."""
    text = path.read_text(encoding="utf-8", errors="replace").rstrip()
    for suffix in ("", "]}", "\n]}"):
        try:
            data = json.loads(text.rstrip(",") + suffix)
        except json.JSONDecodeError:
            continue
        constants = {v: k for k, v in data["constants"]["logEventTypes"].items()}
        return [{**e, "type_name": constants.get(e["type"], "")} for e in data["events"]]
    raise AssertionError(f"unreadable NetLog {path}")


def page_requests(events: list[dict[str, Any]]) -> list[str]:
    """URLs of network requests started for a file:// page (not Chromium's own traffic)."""
    urls = []
    for event in events:
        params = event.get("params") or {}
        if event["type_name"] != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        key = str(params.get("network_isolation_key", ""))
        if key.startswith("file://") or "file://" in str(params.get("site_for_cookies", "")):
            urls.append(str(params["url"]))
    return urls


def load(
    page: Path,
    work: Path,
    *,
    width: int = 1280,
    height: int = 2000,
    screenshot: bool = False,
    wait_ms: int = 0,
) -> PageLoad:
    """Open ``page`` once: DOM after load, page-initiated requests, optional screenshot.

    ``wait_ms`` > 0 lets the page's timers and promises run that long in virtual time before
    the DOM is read (a chart library drawing asynchronously)."""
    assert CHROMIUM is not None, SKIP_REASON
    work.mkdir(parents=True, exist_ok=True)
    netlog = work / f"{page.stem}-{width}.netlog.json"
    shot = work / f"{page.stem}-{width}.png"
    command = [
        CHROMIUM,
        *FLAGS,
        f"--user-data-dir={work / 'profile'}",
        f"--log-net-log={netlog}",
        f"--window-size={width},{height}",
        "--dump-dom",
    ]
    if wait_ms:
        command.append(f"--virtual-time-budget={wait_ms}")
    if screenshot:
        command.append(f"--screenshot={shot}")
    command.append(page.resolve().as_uri())
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return PageLoad(
        dom=done.stdout,
        page_requests=page_requests(_net_events(netlog)),
        screenshot=shot if screenshot else None,
    )


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def measure(page: Path, work: Path, script: str, *, width: int = 1400, wait_ms: int = 0) -> Any:
    """Lay ``page`` out at ``width`` and return what ``script`` (a JS function body) returns;
    a returned Promise is awaited (give it ``wait_ms`` of virtual time).

    Test-only: a copy of the page gets one more inline script that writes the result's JSON
    into the DOM, which ``--dump-dom`` returns; a page with a CSP gets the script's hash.
    """
    hook = (
        "Promise.resolve().then(function () { return (function () { " + script + " })(); })"
        ".then(function (v) { return v; }, function (e) { return {measure_error: String(e)}; })"
        ".then(function (v) { var out = document.createElement('pre'); out.id = 'measured';"
        " out.textContent = JSON.stringify(v); document.body.appendChild(out); });"
    )
    digest = base64.b64encode(hashlib.sha256(hook.encode()).digest()).decode()
    text = page.read_text(encoding="utf-8")
    csp = text.find('http-equiv="Content-Security-Policy"')
    if csp >= 0:  # only inside the policy: a page's inlined library may hold the same words
        at = text.index("script-src ", csp)
        text = f"{text[:at]}script-src &#39;sha256-{digest}&#39; {text[at + 11 :]}"
    end = text.rindex("</body>")  # the last: inlined libraries may spell the tag in strings
    copy = page.with_name(f"{page.stem}-measured-{width}.html")
    copy.write_text(f"{text[:end]}<script>{hook}</script>\n{text[end:]}", encoding="utf-8")
    dom = load(copy, work, width=width, wait_ms=wait_ms).dom
    assert '<pre id="measured">' in dom, "the measuring script did not run"
    found = dom.rsplit('<pre id="measured">', 1)[1].split("</pre>", 1)[0]
    value = json.loads(html.unescape(found))
    assert not (isinstance(value, dict) and "measure_error" in value), value
    return value
