"""Issue #26's targets as ratios, each measured in one run of this script.

    python scripts/bench/fleet_ratios.py [--rounds 1] [--scale] [--clusters 1000] [--apps 10000]
        [--quiet SECONDS]

Runs ``diverse_bench.py`` (1,000 clusters x 10,000 applications) in turn:
plain with the reaction; with workloads (every application a Deployment with
requests, 20 % divided; clusters report capacity); the same workloads in two
more ways, for the ratio of the issue's first target: asking for nothing
(``unrequested``, the issue's "same workload without requests": each replica
still asks for a pod, so Capacity still filters and scores them) and with
Capacity left out of the configuration (``uncapacitated``: all that Capacity
costs; printed, as is the ratio to plain, without a target); and plain without the
reaction three times, one after the other: as configured by default
(``explained``), with explanations off (``explain_limit: 0``) and with a log
line per Binding (``--log-level INFO``; the others log at WARNING) — the
explanations' and the log line's costs compare runs that differ in that one
setting, next to each other (the first run of a round, after the last round's
10,000 x 100,000 one, was up to 8 % slower). With ``--scale``, workloads at
10,000 x 100,000 (about 10 minutes more). Rounds alternate the configurations
so that the machine's load falls on all of them alike; each figure is the
median of its rounds. Prints each target with the figure measured and whether
it is met. The target against etcd is CPU: the scheduler's CPU per Binding
against etcd's CPU per Binding for the same writes (the floor's), which holds on
any number of cores; the wall-clock ratio to the floor is printed as information,
with the best ratio the machine allowed (the CPU that the scheduler, etcd and the
benchmark used while the burst was bound, spread over every core): on a machine
whose cores etcd shares, no split of the scheduler's work goes below it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from berth.controllers.scheduler.config import default_plugins

HERE = Path(__file__).resolve().parent
CONFIGS: dict[str, list[str]] = {
    "plain": ["--no-latency"],
    "workloads": ["--no-latency", "--no-reaction", "--workloads"],
    "unrequested": ["--no-latency", "--no-reaction", "--workloads", "--no-requests"],
    "uncapacitated": ["--no-latency", "--no-reaction", "--workloads", "--config",
                      "{uncapacitated}"],
    "explained": ["--no-latency", "--no-reaction"],
    "unexplained": ["--no-latency", "--no-reaction", "--config", "{unexplained}"],
    "logged": ["--no-latency", "--no-reaction", "--log-level", "INFO"],
}
SCALE = ["--clusters", "10000", "--apps", "100000", "--workloads", "--no-latency",
         "--no-reaction"]


def run(name: str, argv: list[str], scratch: Path) -> dict[str, float]:
    out = scratch / f"{name}.json"
    out.unlink(missing_ok=True)
    argv = [a.format(unexplained=scratch / "unexplained.yaml",
                     uncapacitated=scratch / "uncapacitated.yaml") for a in argv]
    print(f"-- {name}: diverse_bench.py {' '.join(argv)}", flush=True)
    proc = subprocess.run([sys.executable, str(HERE / "diverse_bench.py"), *argv,
                           "--figures", str(out)], text=True, capture_output=True)
    for line in proc.stdout.splitlines():
        if not line.startswith("  so far"):
            print("   ", line)
    if proc.returncode != 0 or not out.exists():
        sys.exit(f"diverse_bench.py {' '.join(argv)} failed ({proc.returncode}):\n"
                 f"{proc.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(out.read_text())
    return figures


def floor_rows(name: str, cpu: float, ratio: float, best: float
               ) -> list[tuple[str, str, str, bool | None]]:
    """The burst against etcd's floor: the target is CPU (the scheduler's per Binding
    against etcd's for the same writes); the wall clock is printed as information, with
    the best the machine allowed (all the CPU the scheduler, etcd and the benchmark used
    in the burst, spread over every core)."""
    return [(f"scheduler CPU / etcd CPU per Binding, {name}", f"{cpu:.2f}", "<= 2", cpu <= 2),
            (f"scheduler / etcd floor, {name}, wall clock (at best, all the burst's CPU on "
             f"{os.cpu_count()} cores: {best:.2f})", f"{ratio:.2f}", "-", None)]


def without_capacity() -> str:
    """A scheduler configuration: the default plugins but Capacity (JSON is YAML)."""
    plugins = {point: [{"name": p.name, "weight": p.weight} for p in specs if p.name != "Capacity"]
               for point, specs in default_plugins().items()}
    return json.dumps({"plugins": plugins}) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--scale", action="store_true", help="also 10,000 x 100,000 (workloads)")
    ap.add_argument("--clusters", type=int, default=1000, help="of every run but --scale's")
    ap.add_argument("--apps", type=int, default=10000, help="of every run but --scale's")
    ap.add_argument("--quiet", type=float, default=5.0, metavar="SECONDS",
                    help="diverse_bench.py's --quiet")
    args = ap.parse_args()
    size = ["--clusters", str(args.clusters), "--apps", str(args.apps)]
    names = [*CONFIGS, *(["scale"] if args.scale else [])]
    runs: dict[str, list[dict[str, float]]] = {n: [] for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        (scratch / "unexplained.yaml").write_text("explain_limit: 0\n")
        (scratch / "uncapacitated.yaml").write_text(without_capacity())
        for r in range(args.rounds):
            for n in names:
                print(f"round {r + 1}/{args.rounds}", end=" ")
                runs[n].append(run(n, [*(SCALE if n == "scale" else [*CONFIGS[n], *size]),
                                       "--quiet", str(args.quiet)], scratch))

    def med(name: str, figure: str) -> float:
        return statistics.median(f[figure] for f in runs[name])

    plain, wl = med("plain", "apps_per_s"), med("workloads", "apps_per_s")
    unrequested = med("unrequested", "apps_per_s")
    uncapacitated = med("uncapacitated", "apps_per_s")
    rows: list[tuple[str, str, str, bool | None]] = [  # met: None for no target
        ("workloads / the same without requests (pods still asked), time per application",
         f"{unrequested / wl:.2f}", "<= 1.3", unrequested / wl <= 1.3),
        ("workloads / the same with Capacity off, time per application",
         f"{uncapacitated / wl:.2f}", "-", None),
        ("workloads / plain (no Deployments, none divided), time per application",
         f"{plain / wl:.2f}", "-", None),
        *(row for n in ("plain", "workloads") for row in floor_rows(
            n, med(n, "cpu_ratio"), med(n, "floor_ratio"), med(n, "floor_best"))),
    ]
    if all("last_s" in f for f in runs["plain"]):
        last = statistics.median(f["last_s"] / (1 + f["written_floor_s"]) for f in runs["plain"])
        moved = statistics.median(f["last_s"] / (1 + f["moved_floor_s"]) for f in runs["plain"])
        first = med("plain", "first_ms")
        rows += [
            (f"reaction: last new Binding / (1 s + floor of the {med('plain', 'written'):.0f} "
             f"Bindings it changes)", f"{last:.2f}", "<= 1", last <= 1),
            (f"reaction: the same, floor of the {med('plain', 'moved'):.0f} moved alone",
             f"{moved:.2f}", "-", None),
            (f"reaction: first new Binding (the values' write takes "
             f"{med('plain', 'values_written_ms'):.0f} ms of it)", f"{first:.0f} ms",
             "<= 100 ms", first <= 100),
        ]
    explained = med("explained", "apps_per_s")
    cost = med("unexplained", "apps_per_s") / explained  # time per application, on / off
    rows.append(("explanations' cost: time per application, explain_limit 3 / 0",
                 f"{(cost - 1) * 100:+.1f} %", "<= 5 %", cost <= 1.05))
    logged = explained / med("logged", "apps_per_s")
    rows.append(("a log line per Binding: time per application, INFO / WARNING",
                 f"{(logged - 1) * 100:+.1f} %", "< 3 %", logged < 1.03))
    if args.scale:
        ratio = med("scale", "apps_per_s") / wl
        rss = med("scale", "peak_rss_mb")
        rows += [("10,000 x 100,000 rate / 1,000 x 10,000 rate, workloads", f"{ratio:.2f}",
                  ">= 0.5", ratio >= 0.5),
                 ("10,000 x 100,000 scheduler peak RSS", f"{rss:.0f} MB", "<= 500 MB",
                  rss <= 500)]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'TARGET':<{width}}  {'MEASURED':>10}  {'WANTED':>10}  MET "
          f"(medians of {args.rounds} round{'s' if args.rounds != 1 else ''})")
    for what, got, wanted, met in rows:
        verdict = "-" if met is None else "yes" if met else "no"
        print(f"{what:<{width}}  {got:>10}  {wanted:>10}  {verdict}")


if __name__ == "__main__":
    main()
