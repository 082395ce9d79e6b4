"""A minimal headless-Chromium driver over the DevTools protocol on a pipe
(--remote-debugging-pipe: commands on fd 3, replies on fd 4, NUL-separated JSON), so the
dashboard can be checked as a person sees it without selenium or a websocket library.
Used by the browser test and scripts/screenshot_report.py."""
from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only (typing.Self needs Python 3.11)
    from typing_extensions import Self


from ..errors import ConfigError

INSTALL_HINT = ("Install headless Chromium: `make setup-browser` (runs `apt-get install -y "
                "chromium chromium-driver`; needs root) or put a chromium binary on PATH.")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--allow-file-access-from-files")


def find_chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise ConfigError(f"No Chromium found on PATH. {INSTALL_HINT}")


class Chromium:
    """`with Chromium() as b: b.open(path); b.eval(js); b.screenshot(out)`."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout_s: float = 30.0):
        self.timeout_s = timeout_s
        self.width, self.height = width, height
        self._profile = tempfile.mkdtemp(prefix="ragrepro-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        binary = find_chromium()
        # bash maps our pipe ends onto the fds 3 and 4 that Chromium expects.
        script = f'exec "$0" "$@" 3<&{to_child_r} 4>&{from_child_w}'
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", script, binary, *FLAGS, f"--user-data-dir={self._profile}",
             "--remote-debugging-pipe", f"--window-size={width},{height}", "about:blank"],
            pass_fds=(to_child_r, from_child_w), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._next_id = 0
        self.session: str | None = None

    # ------------------------------------------------------------------ protocol
    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result") or {}

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout_s
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._from_child], [], [], max(0.0, left))
            if not ready:
                raise TimeoutError(f"Chromium sent nothing for {self.timeout_s:.0f} s.")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium exited (code {self.proc.poll()}). {INSTALL_HINT}")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def page(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.session is None:
            target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            self.session = self.send("Target.attachToTarget",
                                     {"targetId": target, "flatten": True})["sessionId"]
            self.send("Emulation.setDeviceMetricsOverride",
                      {"width": self.width, "height": self.height, "deviceScaleFactor": 1,
                       "mobile": False}, self.session)
        return self.send(method, params, self.session)

    # ------------------------------------------------------------------ actions
    def open(self, path: Path) -> None:
        self.page("Page.navigate", {"url": Path(path).resolve().as_uri()})
        deadline = time.monotonic() + self.timeout_s
        while self.eval("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} did not finish loading.")
            time.sleep(0.05)

    def eval(self, expression: str) -> Any:
        out = self.page("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                              "awaitPromise": True})
        if "exceptionDetails" in out:
            raise RuntimeError(f"JavaScript error in {expression[:80]!r}: "
                               f"{out['exceptionDetails'].get('exception', {}).get('description')}")
        return out.get("result", {}).get("value")

    def screenshot(self, out: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.page("Page.captureScreenshot", params)["data"]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(base64.b64decode(data))
        return out

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close")
                except (RuntimeError, TimeoutError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        finally:
            for fd in (self._to_child, self._from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
