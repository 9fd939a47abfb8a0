"""A headless Chromium driven over the Chrome DevTools Protocol, standard library only.

Chromium is started with ``--remote-debugging-pipe``: it reads commands from file descriptor 3 and
writes replies and events to file descriptor 4, each a JSON message ended by a NUL byte. One browser
and one tab serve every page: ``Browser.open(url, width, height)`` sets the viewport, loads the page and
waits for its load event, ``Browser.evaluate(js)`` returns the value of an expression (a promise is
awaited). Nothing is downloaded: the browser is the system's (Debian's ``chromium``).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import tempfile
import time

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    """The path of a Chromium executable: ``$CHROMIUM`` if set, else the first one on PATH."""
    if os.environ.get("CHROMIUM"):
        return shutil.which(os.environ["CHROMIUM"])
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    def __init__(self, executable: str, timeout: float = 120.0):  # per reply: a loaded CI machine is slow
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="ppo-core-chromium-")
        self._log = tempfile.TemporaryFile()
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds():  # the pipe ends become fds 3 and 4 of the browser (dup2 makes them inheritable)
            high_r, high_w = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [executable, "--headless", "--remote-debugging-pipe", f"--user-data-dir={self._profile.name}",
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--mute-audio", "--hide-scrollbars", "--force-color-profile=srgb",
                # the pages are local files: nothing is fetched from the network
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost",
                "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to start its sandbox as root
        self._proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=self._log, preexec_fn=child_fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict] = []
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            self.call("Page.enable", session=True)
            self.call("Runtime.enable", session=True)
        except Exception:
            self.close()
            raise

    # -- the protocol ---------------------------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise BrowserError(f"no reply from Chromium within {self.timeout:.0f} s")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                self._log.seek(0)
                err = self._log.read().decode(errors="replace")
                raise BrowserError(f"Chromium closed the pipe (exit code {self._proc.poll()}): {err[-2000:]}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: bool = False, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def _wait_event(self, method: str) -> dict:
        deadline = time.monotonic() + self.timeout
        while True:
            for i, event in enumerate(self._events):
                if event["method"] == method:
                    del self._events[: i + 1]
                    return event
            self._events.clear()
            message = self._read_message(deadline)
            if "method" in message:
                self._events.append(message)

    # -- what the tests use ---------------------------------------------------------------------------
    def open(self, url: str, width: int, height: int) -> None:
        """Load ``url`` in a ``width`` x ``height`` viewport (a phone's when narrower than 600 px)."""
        self.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=height,
                  deviceScaleFactor=1, mobile=width < 600)
        self._events.clear()
        self.call("Page.navigate", session=True, url=url)
        self._wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression on the open page (a promise is awaited)."""
        result = self.call("Runtime.evaluate", session=True, expression=expression, awaitPromise=True,
                           returnByValue=True)
        if "exceptionDetails" in result:
            raise BrowserError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                os.write(self._to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                self._proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        self._profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
