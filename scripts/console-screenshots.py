"""The documentation's screenshots of the console, taken from a running demo.

    scripts/run.sh                              # the demo, left running
    .venv/bin/python scripts/console-screenshots.py [--out docs/images]

Opens each page of the console the demo printed (its URL and token from the
demo's state directory, ``$BERTH_DEMO_DIR``) in Debian's chromium, waits until it
is drawn, and saves it as ``console-<page>.png``, 1,200 pixels wide. Two come
from the browser test's artefacts (``build/screenshots/``) instead: a rollout
waiting for approval (``console-rollout.png``: the demo's halts and rolls back
on its own) and a console whose etcd stopped answering
(``console-etcd-lost.png``: the demo's keeps running).
"""

from __future__ import annotations

import argparse
import os
import re
import time
from pathlib import Path

from berth_testkit.browser import chromium, until

ROOT = Path(__file__).resolve().parents[1]
STATE = Path(os.environ.get("BERTH_DEMO_DIR", Path.home() / ".cache" / "berth" / "demo"))
WHAT_IF = """api: kubernetes
kind: Application
metadata:
  name: reports-eu
  namespace: default
spec:
  constraints:
    cluster:
      labels: ["location in (DE, FR)"]
  manifest:
    - apiVersion: apps/v1
      kind: Deployment
      metadata: {name: reports-eu}
      spec:
        replicas: 2
        selector: {matchLabels: {app: reports-eu}}
        template:
          metadata: {labels: {app: reports-eu}}
          spec:
            containers:
              - name: c
                image: example/reports:1
                resources: {requests: {cpu: 100m, memory: 64Mi}}
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = p.parse_args()
    log = (STATE / "logs" / "console.log").read_text()
    url = re.findall(r"berth console: (http://\S+/)", log)[-1]
    token = (STATE / "console-token").read_text().strip()
    args.out.mkdir(parents=True, exist_ok=True)
    with chromium(width=1200, height=760) as driver:
        driver.get(url)
        driver.execute_script("sessionStorage.setItem('berth-token', arguments[0]);"
                              "sessionStorage.setItem('berth-group', 'location')", token)

        def shot(page: str, ready: str, name: str, height: int = 760) -> None:
            driver.set_window_size(1200, height)
            driver.get(f"{url}#/{page}")
            driver.refresh()
            until(lambda: driver.find_elements("css selector", ready), timeout=30, what=page)
            time.sleep(1.0)
            driver.save_screenshot(str(args.out / f"console-{name}.png"))
            print(f"console-{name}.png")

        shot("fleet", "tr[data-cluster]", "fleet", 560)
        shot("applications", "#apps tbody tr", "applications", 480)
        shot("application/default/web", "#ledger li", "application", 1100)
        shot("metrics", "#chart canvas", "metrics", 820)
        driver.set_window_size(1200, 900)
        driver.get(f"{url}#/what-if")
        area = until(lambda: driver.find_element("id", "whatif-yaml"))
        driver.execute_script("arguments[0].value = arguments[1]", area, WHAT_IF)
        driver.find_element("id", "whatif-run").click()
        until(lambda: driver.find_elements("css selector", ".answer"), timeout=60)
        time.sleep(0.5)
        driver.save_screenshot(str(args.out / "console-what-if.png"))
        print("console-what-if.png")


if __name__ == "__main__":
    main()
