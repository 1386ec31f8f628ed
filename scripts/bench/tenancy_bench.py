"""What teams' policies cost the scheduler (docs/teams.md): ``diverse_bench`` with and
without them, alternating, in one run.

    python scripts/bench/tenancy_bench.py [--clusters 1000] [--apps 10000]
        [--namespaces 50] [--rounds 3]

Each round runs ``diverse_bench.py --no-latency --no-reaction`` twice, on an etcd
of its own each time: the applications in namespace ``default`` with no policy
(off), then the same applications — the same seed: the same constraints, the
same decisions — spread over ``--namespaces`` teams' namespaces, each with a
NamespacePolicy binding a ClusterSet of every cluster and a quota of every
resource and count that refuses nothing (on). Without a policy a namespace
places on its own clusters alone, so "off" cannot spread the applications over
namespaces that share the clusters: what differs between the two is the
policies' work — the set's filter of every cluster, the quota's counting of
every decision — and nothing else. Prints the scheduler's CPU per Binding each
time, its ratio to etcd's for the same writes, and the median of on/off (target
≤ 1.10).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = 1.10


def one(args: argparse.Namespace, namespaces: int, out: Path) -> dict[str, float]:
    cmd = [sys.executable, str(HERE / "diverse_bench.py"), "--no-latency", "--no-reaction",
           "--quiet", "1", "--clusters", str(args.clusters), "--apps", str(args.apps),
           "--seed", str(args.seed), "--figures", str(out), "--namespaces", str(namespaces)]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{run.stdout[-2000:]}{run.stderr[-2000:]}")
    for line in run.stdout.splitlines():
        if line.startswith(("throughput:", "CPU per Binding:")):
            print(f"    {line}", flush=True)
    figures: dict[str, float] = json.loads(out.read_text())
    return figures


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--apps", type=int, default=10000)
    ap.add_argument("--namespaces", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ratios: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(1, args.rounds + 1):
            got: dict[str, dict[str, float]] = {}
            for label, spaces in (("off", 0), ("on", args.namespaces)):
                print(f"round {n}, policies {label} ({spaces or 'no'} teams' namespaces):",
                      flush=True)
                got[label] = one(args, spaces, Path(tmp) / f"{label}-{n}.json")
            ratio = got["on"]["cpu_us"] / got["off"]["cpu_us"]
            ratios.append(ratio)
            print(f"  round {n}: the scheduler's CPU per Binding {got['off']['cpu_us']:.0f} µs "
                  f"off, {got['on']['cpu_us']:.0f} µs on ({args.namespaces} namespaces with "
                  f"policies): on/off {ratio:.3f}; times etcd's for the same writes "
                  f"{got['off']['cpu_ratio']:.2f} off, {got['on']['cpu_ratio']:.2f} on",
                  flush=True)
    median = statistics.median(ratios)
    print(f"policies on/off, the scheduler's CPU per Binding: median {median:.3f} of "
          f"{', '.join(f'{r:.3f}' for r in ratios)} (target ≤ {TARGET:.2f}: "
          f"{'met' if median <= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
