"""A real browser for the console's tests: Debian's ``chromium``, headless, driven by
Selenium through Debian's ``chromium-driver`` (Selenium downloads nothing: it is
given the driver's path).

Screenshots go to ``build/screenshots/`` (or ``$BERTH_SCREENSHOTS``): the tests'
artefacts, kept after the run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from berth_testkit.servers.etcd import ServerUnavailable

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = Path(os.environ.get("BERTH_SCREENSHOTS", ROOT / "build" / "screenshots"))
T = TypeVar("T")

HOW = ("the console's browser tests need Debian's chromium and chromium-driver: "
       "apt-get install chromium chromium-driver (scripts/setup.sh installs them)")


def _binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise ServerUnavailable(f"no {names[0]} on PATH: {HOW}")


@contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A headless chromium under Selenium; ServerUnavailable says how to get one."""
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    browser = _binary("chromium", "chromium-browser")
    driver_path = _binary("chromedriver")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--no-first-run",
                "--disable-background-networking", "--disable-extensions"):
        options.add_argument(arg)
    # A directory of its own for its profile and temporary files, removed after (else
    # chromium leaves a profile in the temporary directory per run); under /tmp itself,
    # as a socket's path it holds must stay short (108 bytes), whatever TMPDIR says
    with tempfile.TemporaryDirectory(prefix="berth-chromium-",
                                     dir="/tmp" if os.path.isdir("/tmp") else None) as own:
        options.add_argument(f"--user-data-dir={own}/profile")
        service = Service(driver_path, env={**os.environ, "TMPDIR": own})
        try:
            driver = webdriver.Chrome(service=service, options=options)
        except WebDriverException as exc:
            raise ServerUnavailable(f"chromium did not start under {driver_path}: "
                                    f"{exc.msg}; {HOW}") from None
        try:
            yield driver
        finally:
            driver.quit()


def screenshot(driver: Any, name: str, *, full: bool = True) -> Path:
    """The page as ``<name>.png`` among the artefacts: in full (up to 3,000 pixels
    tall), or (``full=False``) what the window shows."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    width = driver.get_window_size()["width"]
    if full and height > driver.get_window_size()["height"]:
        driver.set_window_size(width, min(int(height) + 120, 3000))
        time.sleep(0.3)
    driver.save_screenshot(str(path))
    return path


def until(get: Callable[[], T | None], timeout: float = 20.0, every: float = 0.05,
          what: str = "the page") -> T:
    """``get()`` once it is not None/false (it may raise while the page is drawn)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            got = get()
            if got:
                return got
        except Exception as exc:  # a stale element while the page redraws
            last = exc
        time.sleep(every)
    raise AssertionError(f"{what} did not show it in {timeout} s" + (f" ({last})" if last
                                                                      else ""))
