"""The ledger's cost and size (docs/ledger.md), measured.

    python scripts/bench/ledger_bench.py [--clusters 1000] [--apps 10000] [--rounds 2]
        [--fleet-apps 10000] [--hours 24] [--skip-cost | --skip-size] [--max-txn-ops N]
        [--quiet SECONDS]

1. Cost: runs ``diverse_bench.py --no-latency`` with the ledger on and off,
   alternating, ``--rounds`` times each (the machine's noise is ±8 %: one pair
   says little), and prints the medians of the scheduler's throughput and CPU
   per application, the reaction's last new Binding, and on/off ratios. The
   records the runs wrote are kept as samples.
2. Size: on an etcd of its own, writes what ``--fleet-apps`` applications
   moving every hour for ``--hours`` leave in the ledger — per move, one of the
   scheduler's records (real ones, sampled from step 1's reaction) and the
   propagator's three (the copy applied and progressing, healthy, the old one
   removed; made by its own record function) — in transactions of 128, and
   prints the bytes per record, their total, and etcd's database size before and
   after (``dbSize`` and ``dbSizeInUse`` from its maintenance status).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from berth.controllers.propagator.record import copy_record
from berth.store import EtcdConfig, Put, Store, ledger
from berth.store.codec import decode
from berth.store.documents import ApplicationState, AppState, ClusterApplied, HealthState, ObjectRef
from berth.store.documents.ledger import Record
from berth_testkit.servers.etcd import EtcdServer

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "scripts" / "bench"
SAMPLES = ROOT / "ledger-bench-samples.jsonl"


def diverse(args: argparse.Namespace, on: bool, figures: Path) -> dict[str, float]:
    cmd = [sys.executable, str(BENCH / "diverse_bench.py"), "--clusters", str(args.clusters),
           "--apps", str(args.apps), "--no-latency", "--figures", str(figures),
           "--max-txn-ops", str(args.max_txn_ops), "--quiet", str(args.quiet)]
    if on:
        cmd += ["--ledger-samples", str(SAMPLES)]
    else:
        cmd.append("--no-ledger")
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"diverse_bench.py failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    for line in done.stdout.splitlines():
        if line.startswith(("throughput:", "reaction:", "ledger")):
            print(f"    {line[:160]}")
    return dict(json.loads(figures.read_text()))


def cost(args: argparse.Namespace) -> None:
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    figures = ROOT / "ledger-bench-figures.json"
    for r in range(args.rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            print(f"  round {r + 1}, ledger {'on' if on else 'off'}:", flush=True)
            runs[on].append(diverse(args, on, figures))
    print(f"cost ({args.rounds} rounds each, alternating; medians):")
    for key, label, better in (("apps_per_s", "throughput, apps/s", "higher"),
                               ("cpu_us", "scheduler CPU per application, µs", "lower"),
                               ("last_s", "reaction, last new Binding, s", "lower")):
        with_ = statistics.median(f.get(key, 0.0) for f in runs[True])
        without = statistics.median(f.get(key, 0.0) for f in runs[False])
        print(f"  {label}: on {with_:.1f}, off {without:.1f}; on/off "
              f"{with_ / without if without else 0:.3f} "
              f"({better} is better)")
    on_rate = statistics.median(f["apps_per_s"] for f in runs[True])
    off_rate = statistics.median(f["apps_per_s"] for f in runs[False])
    print(f"ledger's cost in throughput: {(1 - on_rate / off_rate) * 100:.1f}% "
          f"(target: at most 5%)")
    rec = statistics.median(f.get("record_bytes", 0.0) for f in runs[True])
    print(f"scheduler records of the burst: {rec:.0f} bytes each (median of the runs)")


def propagator_records(at: datetime) -> list[Record]:
    """What the propagator records of one move (made by its own record function)."""
    old = ApplicationState(state=AppState.RUNNING, generation=1, running_on=[
        ObjectRef("Cluster", "cluster-0001", "default")], applied={
        "default/cluster-0001": ClusterApplied(generation=1, health=HealthState.HEALTHY)})
    moving = ApplicationState(state=AppState.MIGRATING, reason="moving to default/cluster-0420",
                              generation=1, applied={
                                  **old.applied, "default/cluster-0420": ClusterApplied(
                                      generation=1, health=HealthState.PROGRESSING,
                                      reason="0/2 replicas available", new=True)})
    healthy = ApplicationState(state=AppState.MIGRATING, generation=1, applied={
        **old.applied,
        "default/cluster-0420": ClusterApplied(generation=1, health=HealthState.HEALTHY)})
    done = ApplicationState(state=AppState.RUNNING, generation=1, applied={
        "default/cluster-0420": ClusterApplied(generation=1, health=HealthState.HEALTHY)})
    out = []
    for i, (a, b) in enumerate(((old, moving), (moving, healthy), (healthy, done))):
        r = copy_record(a, b, at + timedelta(seconds=5 * i))
        assert r is not None
        out.append(r)
    return out


def db_size(store: Store) -> tuple[int, int]:
    reply = store.call("maintenance/status", {}, "status")
    return int(reply.get("dbSize") or 0), int(reply.get("dbSizeInUse") or 0)


def size(args: argparse.Namespace) -> None:
    samples = [decode(line.encode(), Record) for line in SAMPLES.read_text().splitlines()
               if line] if SAMPLES.exists() else []
    moved = [s for s in samples if s.event == "Moved"] or samples
    if not moved:
        raise SystemExit(f"no sampled scheduler records in {SAMPLES}: run without --skip-cost")
    server = EtcdServer(extra=["--quota-backend-bytes", str(8 * 2**30)]).start()
    try:
        store = Store(EtcdConfig(url=server.url))
        before = db_size(store)
        start = datetime(2026, 11, 1, tzinfo=UTC)
        ops: list[Put] = []
        counts = {"scheduler": 0, "propagator": 0}
        value_bytes = {"scheduler": 0, "propagator": 0}
        t0 = time.perf_counter()

        def flush() -> None:
            store.commit(ops)
            ops.clear()

        for hour in range(args.hours):
            for a in range(args.fleet_apps):
                at = start + timedelta(hours=hour, seconds=a * 3600 / args.fleet_apps)
                s = moved[(hour * args.fleet_apps + a) % len(moved)]
                s = Record(**{**{f: getattr(s, f) for f in s.__struct_fields__}, "time": at})
                made = [("scheduler", s)] + [("propagator", p)
                                             for p in propagator_records(at)]
                for by, r in made:
                    op = ledger.put("Application", "default", f"app-{a:06d}", by, r)
                    counts[by] += 1
                    value_bytes[by] += len(op.value)
                    ops.append(op)
                    if len(ops) >= 128:
                        flush()
            print(f"  hour {hour + 1}/{args.hours} written ({time.perf_counter() - t0:.0f}s)",
                  flush=True)
        if ops:
            flush()
        after = db_size(store)
        total = sum(counts.values())
        for by in counts:
            print(f"{by} records: {counts[by]}, {value_bytes[by] / max(1, counts[by]):.0f} "
                  f"bytes each (value; the key adds {len(op.key)})")
        print(f"{args.fleet_apps} applications moving hourly for {args.hours} h: {total} records,"
              f" {sum(value_bytes.values()) / 2**20:.1f} MiB of values; etcd's database "
              f"{before[0] / 2**20:.1f} -> {after[0] / 2**20:.1f} MiB (in use "
              f"{before[1] / 2**20:.1f} -> {after[1] / 2**20:.1f} MiB), "
              f"{(after[1] - before[1]) / max(1, total):.0f} bytes per record in etcd")
    finally:
        server.cleanup()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--apps", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2, help="runs with the ledger on, and off")
    ap.add_argument("--max-txn-ops", type=int, default=128,
                    help="etcd's --max-txn-ops and berth's --etcd-max-txn-ops")
    ap.add_argument("--quiet", type=float, default=5.0, metavar="SECONDS",
                    help="diverse_bench.py's --quiet")
    ap.add_argument("--fleet-apps", type=int, default=10000)
    ap.add_argument("--hours", type=int, default=24)
    ap.add_argument("--skip-cost", action="store_true",
                    help="only the size (with the samples of an earlier run)")
    ap.add_argument("--skip-size", action="store_true", help="only the cost")
    args = ap.parse_args()
    if not args.skip_cost:
        SAMPLES.unlink(missing_ok=True)
        cost(args)
    if not args.skip_size:
        size(args)


if __name__ == "__main__":
    main()

