"""A real headless Chromium (Debian's ``chromium``) for the tests of the pages the
governor writes: run once on a page (``--dump-dom``, ``--screenshot``), or
driven over its DevTools protocol on a pipe to click, to emulate a phone's
width, and to measure the page's layout from outside it.

The measuring is done by `Runtime.evaluate`, DevTools' own evaluation, which
the page's Content-Security-Policy does not govern: the page under test is the
page as written, its policy intact (no test-only script is added to it, and
its own policy would refuse one)."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)


def find_chromium() -> str:
    """Chromium's path; skipped where it is not installed, failed in CI."""
    found = shutil.which("chromium")
    if found is None:
        problem = "chromium is not installed (Debian's package: apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"CI must install chromium: {problem}", pytrace=False)
        pytest.skip(problem)
    return found


def artifacts(fallback: Path) -> Path:
    """Where screenshots go: $ACP_GOVERNOR_ARTIFACTS (CI keeps it), else ``fallback``."""
    folder = Path(os.environ.get("ACP_GOVERNOR_ARTIFACTS") or fallback)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def browse(chromium: str, page: Path, profile: Path, *args: str, fragment: str = "") -> str:
    """What a headless Chromium makes of ``page`` (its DOM after the script ran, or
    what ``args`` ask for), with a fresh profile and nothing that phones home."""
    profile.mkdir(parents=True, exist_ok=True)
    argv = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args]
    done = subprocess.run(
        [*argv, page.resolve().as_uri() + fragment], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class DevTools:
    """A headless Chromium driven over its DevTools protocol on a pipe
    (``--remote-debugging-pipe``: commands on its fd 3, answers on its fd 4, each
    message JSON ended by NUL), so a test can click in the page as a person would.
    Every read has a deadline: a browser that hangs fails the test, not CI."""

    def __init__(self, answers: int, commands: int, timeout: float = 60) -> None:
        self.answers, self.commands, self.timeout = answers, commands, timeout
        self.n = 0
        self.pending = b""
        self.session: str | None = None

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.n += 1
        message: dict[str, Any] = {"id": self.n, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self.commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self.pending:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([self.answers], [], [], max(left, 0))
                assert ready, f"chromium did not answer {method} in {self.timeout} s"
                chunk = os.read(self.answers, 1 << 16)
                assert chunk, f"chromium closed its pipe during {method}"
                self.pending += chunk
            raw, self.pending = self.pending.split(b"\0", 1)
            answer = json.loads(raw)
            if answer.get("id") == self.n:
                assert "error" not in answer, (method, answer["error"])
                result: dict[str, Any] = answer["result"]
                return result

    def open(self, url: str, width: int | None = None, *, mobile: bool = False) -> None:
        """Open ``url`` in a new tab and wait until it has loaded; with ``width``,
        in a window that wide (``mobile``: as a phone lays a page out, where a
        page without a viewport tag is drawn 980 px wide and shrunk)."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        if width is not None:
            self.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile},
            )
        self.call("Page.navigate", {"url": url})
        deadline = time.monotonic() + self.timeout
        loaded = f"document.readyState === 'complete' && location.href === {json.dumps(url)}"
        while not self.eval(loaded):  # (a new tab is about:blank, complete, at first)
            assert time.monotonic() < deadline, f"{url} did not load"
            time.sleep(0.05)

    def eval(self, expression: str) -> Any:
        """The value of a JavaScript expression in the open page."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    def reveal(self, selector: str) -> None:
        """Scroll the last element ``selector`` matches into view and wait until
        it is drawn, as a reader scrolls to it: a ``content-visibility: auto`` box
        off screen is skipped, and its text reads '' until it comes into view."""
        reveal = (
            "new Promise(done => {"
            f" const el = Array.from(document.querySelectorAll({json.dumps(selector)})).pop();"
            " if (!el) { done(false); return; }"
            " el.scrollIntoView({block: 'start'});"
            " const drawn = () => el.checkVisibility({contentVisibilityAuto: true});"
            " const wait = n => drawn() || n === 0 ? done(drawn())"
            "   : requestAnimationFrame(() => wait(n - 1));"
            " wait(600); })"
        )
        result = self.call(
            "Runtime.evaluate", {"expression": reveal, "returnByValue": True, "awaitPromise": True}
        )
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        assert result["result"].get("value") is True, f"{selector} was not drawn"

    def screenshot(self, target: Path) -> None:
        """The whole page, top to bottom, as a PNG at ``target``."""
        shot = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        target.write_bytes(base64.b64decode(shot["data"]))


@contextmanager
def devtools(chromium: str, profile: Path) -> Iterator[DevTools]:
    """A Chromium of its own, closed (or killed) at the end."""
    commands_read, commands = os.pipe()
    answers, answers_write = os.pipe()

    def as_fd_3_and_4() -> None:
        os.dup2(commands_read, 3)
        os.dup2(answers_write, 4)

    profile.mkdir(parents=True, exist_ok=True)
    argv = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-pipe"]
    browser = subprocess.Popen(
        [*argv, "about:blank"],
        pass_fds=(3, 4, commands_read, answers_write),
        preexec_fn=as_fd_3_and_4,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(commands_read)
    os.close(answers_write)
    tools = DevTools(answers, commands)
    try:
        yield tools
        tools.call("Browser.close")
        browser.wait(timeout=30)
    finally:
        if browser.poll() is None:
            browser.kill()
            browser.wait()
        os.close(answers)
        os.close(commands)


LAYOUT = """
(() => {
  const root = document.documentElement;
  const width = root.clientWidth;
  const outside = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest(".scroll")) { continue; }  /* a wide table scrolls in its own box */
    const box = el.getBoundingClientRect();
    if (box.width > 0 && (box.right > width + 0.5 || box.left < -0.5)) {
      outside.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : ""));
    }
  }
  const counts = [];
  for (const el of document.querySelectorAll(".t-count")) {
    el.scrollIntoView({block: "center"});
    const box = el.getBoundingClientRect();
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    counts.push({id: el.id, text: el.textContent, left: box.left, right: box.right,
                 width: box.width, on_top: hit === el || el.contains(hit)});
  }
  const boxes = [];
  for (const el of document.querySelectorAll(".scroll")) {
    boxes.push({width: el.getBoundingClientRect().width, inner: el.scrollWidth});
  }
  window.scrollTo(0, 0);
  return {window: window.innerWidth, width: width, scroll_width: root.scrollWidth, outside: outside.slice(0, 20),
          counts: counts, boxes: boxes};
})()
"""
"""What a test asserts of a page's layout, measured in the page: the window's
width and the page's (the window's less a scroll bar), how
wide its content is, the elements outside the window that are not in a scroll
box, each tally count's box and whether it is on top where it is drawn, and the
scroll boxes' widths."""


def layout(tools: DevTools) -> dict[str, Any]:
    """`LAYOUT` in the open page."""
    value: dict[str, Any] = tools.eval(LAYOUT)
    return value
