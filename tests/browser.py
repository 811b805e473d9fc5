"""Headless Chromium for the viewer's tests, driven over the DevTools protocol with the
``websockets`` client the lock already pins (no WebDriver): real clicks and pointer moves
(``Input.dispatchMouseEvent``), typing, script evaluation in the page, every request the page
makes (``Network.requestWillBeSent``), its uncaught errors, and screenshots.

    with Browser.start(profile_dir) as browser:
        browser.navigate("http://127.0.0.1:8000/viewer")
        browser.wait_for("document.querySelector('#login:not([hidden])')")
        browser.click("#login-button")

Debian's ``chromium`` (``apt-get install chromium``; ``.ci/run`` installs it where missing).
Chromium running as root needs ``--no-sandbox``; the rest of the flags keep it from reaching
the network on its own (updates, sync, background requests).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

CANDIDATES = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]


def find_chromium() -> str | None:
    """The Chromium executable ($BOOKINDEX_CHROMIUM, else the first on the path), or None."""
    wanted = os.environ.get("BOOKINDEX_CHROMIUM")
    for name in ([wanted] if wanted else []) + list(CANDIDATES):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One Chromium process and one page, over a DevTools websocket."""

    def __init__(
        self,
        process: subprocess.Popen,
        opened: contextlib.ExitStack,
        socket: Any,
        width: int,
        height: int,
    ) -> None:
        self.process = process
        self.opened = opened
        self.socket = socket
        self.width, self.height = width, height
        self.next_id = 0
        self.requests: list[dict] = []  # every request the page made: url, method, headers
        self.errors: list[str] = []  # uncaught exceptions and console errors of the page
        self.responses: list[tuple[str, int]] = []  # (url, status) of every response
        self.loads = 0  # documents loaded (Page.loadEventFired)

    @classmethod
    def start(
        cls, profile: Path, executable: str | None = None, width: int = 1400, height: int = 1000
    ) -> Browser:
        executable = executable or find_chromium()
        if executable is None:
            raise FileNotFoundError("no chromium on the path (apt-get install chromium)")
        profile.mkdir(parents=True, exist_ok=True)
        command = [executable, *FLAGS, f"--user-data-dir={profile}"]
        command += [f"--window-size={width},{height}", "about:blank"]
        log = (profile / "chromium.log").open("w")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (active.is_file() and len(active.read_text().split()) >= 2):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(
                    "chromium did not start:\n" + (profile / "chromium.log").read_text()[-2000:]
                )
            time.sleep(0.1)
        port = int(active.read_text().split()[0])
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy
        with direct.open(f"http://127.0.0.1:{port}/json/list", timeout=30) as reply:
            targets = json.load(reply)
        page = next(t for t in targets if t["type"] == "page")
        opened = contextlib.ExitStack()  # the socket's context, closed by close()
        socket = opened.enter_context(
            connect(
                page["webSocketDebuggerUrl"],
                max_size=None,
                open_timeout=30,
                proxy=None,
                ping_interval=None,  # a long wait between commands is no dead connection
            )
        )
        browser = cls(process, opened, socket, width, height)
        for domain in ("Page.enable", "Runtime.enable", "Network.enable"):
            browser.send(domain)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return browser

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.opened.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    # ---- the protocol --------------------------------------------------------------------------
    def send(self, method: str, timeout: float = 120, **params: Any) -> dict:
        """One DevTools command; its result (events that arrive meanwhile are recorded)."""
        self.next_id += 1
        wanted = self.next_id
        self.socket.send(json.dumps({"id": wanted, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._event(message)

    def _event(self, message: dict) -> None:
        method, params = message.get("method"), message.get("params", {})
        if method == "Page.loadEventFired":
            self.loads += 1
        elif method == "Network.responseReceived":
            response = params["response"]
            self.responses.append((response["url"], response["status"]))
        elif method == "Network.requestWillBeSent":
            request = params["request"]
            self.requests.append(
                {"url": request["url"], "method": request["method"], "headers": request["headers"]}
            )
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.errors.append(details.get("exception", {}).get("description") or details["text"])
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
            )

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (a promise awaited)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(details.get("exception", {}).get("description") or details["text"])
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 120, what: str = "") -> Any:
        """Poll ``expression`` until it is truthy in JavaScript's terms (an element found
        comes back as ``{}``); its value. A time-out says what was awaited and what the
        viewer's status line says."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value is not None and value is not False and value != 0 and value != "":
                return value
            if time.monotonic() > deadline:
                seen = self.evaluate(
                    "[location.href, (document.getElementById('status') || {}).textContent,"
                    " (document.getElementById('view') || {innerHTML: ''}).innerHTML.slice(0, 300)]"
                )
                raise TimeoutError(
                    f"waited {timeout:g} s for {what or expression}; page {seen[0]}, status "
                    f"{seen[1]!r}, view {seen[2]!r}; last responses {self.responses[-4:]}; "
                    f"errors {self.errors[-3:]}"
                )
            time.sleep(0.1)

    def navigate(self, url: str, timeout: float = 120) -> None:
        """Go to ``url``: a new document (loaded: its load event came) or, where only the
        fragment changes, the same one."""
        loads = self.loads
        result = self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while "loaderId" in result and self.loads == loads:  # a new document: wait for it
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load in {timeout:g} s")
            self.send("Runtime.evaluate", expression="0")  # reads the events meanwhile
            time.sleep(0.05)
        self.wait_for("document.readyState === 'complete'", what=f"{url} to load")

    # ---- a person's input ---------------------------------------------------------------------
    def centre(self, selector: str, fx: float = 0.5, fy: float = 0.5) -> tuple[float, float]:
        """A point inside the first element ``selector`` finds (scrolled into view), as
        fractions of its box."""
        found = self.evaluate(
            f"""(() => {{
                const e = document.querySelector({json.dumps(selector)});
                if (!e) return null;
                e.scrollIntoView({{block: "center", inline: "center"}});
                const r = e.getBoundingClientRect();
                return [r.left + {fx} * r.width, r.top + {fy} * r.height];
            }})()"""
        )
        if found is None:
            raise LookupError(f"nothing matches {selector}")
        return found[0], found[1]

    def click(self, selector: str) -> None:
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def hover(self, selector: str) -> None:
        x, y = self.centre(selector)
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def type_into(self, selector: str, text: str) -> None:
        self.click(selector)
        self.send("Input.insertText", text=text)

    def screenshot(self, path: Path) -> Path:
        """The whole page as PNG at ``path`` (scrolled to the top first: the sticky bar
        stays at the top of the picture)."""
        self.evaluate("window.scrollTo(0, 0)")
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000)}
        shot = self.send(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={**clip, "scale": 1},
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
