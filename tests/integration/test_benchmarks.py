"""Every benchmark under ``scripts/bench/`` runs here at a tiny size: it completes and
prints its figures, so that none rots unseen between the runs that measure (those are
run by hand, at full size; docs/benchmarks.md). The figures themselves are not judged:
at this size they say nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "scripts" / "bench"

# script, its arguments at a tiny size, what it must print
RUNS: list[tuple[str, list[str], list[str]]] = [
    ("store_bench.py", ["--updates", "20", "--events", "100"],
     [r"CAS update \(20 sequential\): p50 [\d.]+ ms, p99 [\d.]+ ms"]),
    ("decide_bench.py", ["--clusters", "20", "--apps", "50", "--rounds", "1"],
     [r"workloads: [\d.]+ µs per decision \(\d+ of 50 placed\)"]),
    ("export_bench.py", ["--apps", "60", "--clusters", "10", "--moves", "10"],
     [r"berth exporter, from its start to Synced: [\d.]+ s",
      r"ratio, exporter to floor \(first export\): [\d.]+x",
      r"lag of 10 moves at 20/s, .* p50 \d+ ms, p90 \d+ ms, p99 \d+ ms",
      r"ratio, move lag to floor \(p50\): [\d.]+x"]),
    ("preempt_bench.py", ["--clusters", "20", "--apps", "200", "--arrivals", "5"],
     [r"5 arrivals: 0 fitted, 5 plans \(\d+ victims moved, \d+ stopped\)",
      r"ratio, full fleet's plan to emptier fleet's decision \(medians\): wall [\d.]+x"]),
    ("deferral_bench.py", ["--days", "1", "--clusters", "6", "--jobs-per-hour", "4",
                           "--services", "5"],
     [r"saving on jobs vs ignoring the signal: -?[\d.]+%", r"deadline misses: \d+"]),
    ("scheduler_bench.py", ["--clusters", "20", "--apps", "100", "--rate", "50",
                            "--seconds", "1"],
     [r"latency at 50 apps/s offered", r"scheduler/floor time ratio [\d.]+"]),
    ("diverse_bench.py", ["--clusters", "20", "--apps", "100", "--rate", "50",
                          "--seconds", "1", "--quiet", "0.5"],
     [r"latency at 50 apps/s offered .* p99 [\d.]+ ms",
      r"CPU per Binding: the scheduler \d+ µs, etcd \d+ µs .* scheduler/etcd [\d.]+"]),
    ("ledger_bench.py", ["--clusters", "20", "--apps", "100", "--rounds", "1",
                         "--fleet-apps", "50", "--hours", "2", "--quiet", "0.5"],
     [r"ledger's cost in throughput: -?[\d.]+%",
      r"50 applications moving hourly for 2 h: 400 records"]),
    ("console_bench.py", ["--clusters", "10", "--apps", "200", "--churn", "100", "--seconds",
                          "2", "--requests", "2"],
     [r"console: synced in [\d.]+ s", r"rest +applications +p50 +\d+ ms",
      r"churn +fleet in chromium +p50 +\d+ ms",
      r"memory: \d+ MiB resident after the churn"]),
    ("fleet_ratios.py", ["--clusters", "20", "--apps", "100", "--quiet", "0.5"],
     [r"TARGET +MEASURED", r"explanations' cost: time per application"]),
    ("metrics_cache_bench.py", ["--prometheus", "50", "--static", "50", "--window", "3",
                                 "--poll", "1"],
     [r"batched vs one query per metric: CPU [\d.]+x"]),
    ("kafka_bench.py", ["--rate", "200", "--seconds", "2", "--metrics", "50"],
     [r"produced \d+ records at \d+/s", r"catch-up of \d+ records from the beginning"]),
    ("propagator_bench.py", ["--apps", "10", "--workers", "4"],
     [r"ratio propagator / sequential floor: [\d.]+"]),
    ("propagator_scale_bench.py", ["--clusters", "2", "--apps", "10", "--servers", "1",
                                   "--replicas", "1", "--workers", "4"],
     [r"replicas +all RUNNING +apps/s"]),
    ("overrides_bench.py", ["--apps", "10", "--rounds", "1", "--workers", "4"],
     [r"ratio with / without: time [\d.]+"]),
    ("availability_bench.py", ["--apps", "6", "--servers", "2", "--contexts", "2",
                               "--move", "0.5", "--workers", "4"],
     [r"ratio \(target: .*\): all [\d.]+, p50 [\d.]+, p99 [\d.]+",
      r"handed over → available p50 [\d.]+ s, p99 [\d.]+ s; its apply returned",
      r"berth's steps, p50 / p99: write → Bound [\d.]+ / [\d.]+ s; Bound → on its cluster"
      r" [\d.]+ / [\d.]+ s \(the floor's handed over → on its cluster [\d.]+ / [\d.]+ s\)",
      r"moves: 3 applications \(50%\)",
      r"moves / floor \(target: .*\): all [\d.]+, p50 [\d.]+, p99 [\d.]+",
      r"alone in etcd .*: p50 [\d.]+ s, p99 [\d.]+ s"]),
    ("availability_bench.py", ["--apps", "6", "--servers", "2", "--contexts", "2",
                               "--move", "0.5", "--workers", "4", "--mode", "Pull"],
     [r"clusters in Pull mode \(4 agents\)",
      r"the propagator's CPU [\d.]+ ms per application, the agents' [\d.]+ ms",
      r"moves / floor \(target: .*\): all [\d.]+, p50 [\d.]+, p99 [\d.]+"]),
    ("tenancy_bench.py", ["--clusters", "20", "--apps", "60", "--namespaces", "3",
                          "--rounds", "1"],
     [r"round 1: the scheduler's CPU per Binding [\d.]+ µs off, [\d.]+ µs on \(3 namespaces",
      r"policies on/off, the scheduler's CPU per Binding: median [\d.]+ of [\d.]+"]),
    ("access_bench.py", ["--users", "3"],
     [r"3 users: berth access grant [\d.]+ s", r"ratio grant/floor: [\d.]+"]),
    ("agents_scale_bench.py", ["--agents", "4", "--apps", "20", "--move", "0.5",
                               "--servers", "1"],
     [r"pull: 4 agents authenticated, heartbeating and watching",
      r"pull, first placements: 20 RUNNING in [\d.]+ s; .* Binding → its agent's report "
      r"p50 [\d.]+ s",
      r"pull / push: first placements all [\d.]+, p99 [\d.]+; moves p99 [\d.]+; etcd CPU"]),
    # (a profile's samples summed per stage: a sample of py-spy's raw output stands in for
    # one diverse_bench.py --profile records)
    ("stages.py", [str(Path(__file__).with_name("stages-sample.txt")), "--per", "10",
                   "--us-per-item", "100"],
     [r"100 samples .* over 10 items", r"decide \(framework, plugins\) +60\.0%  +60\.0 µs",
      r"etcd requests .* 25\.0%", r"decode .* 10\.0%", r"other .* 5\.0%"]),
]


def test_every_benchmark_is_run_here() -> None:
    scripts = {p.name for p in BENCH.glob("*.py")} - {"workload.py"}  # a module they share
    assert scripts == {name for name, _, _ in RUNS}


@pytest.mark.parametrize(("script", "args", "printed"), RUNS,
                         ids=[r[0] + (" pull" if "Pull" in r[1] else "") for r in RUNS])
def test_a_benchmark_completes_and_prints_its_figures(script: str, args: list[str],
                                                      printed: list[str], tmp_path: Path
                                                      ) -> None:
    began = time.monotonic()
    done = subprocess.run([sys.executable, str(BENCH / script), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONUNBUFFERED": "1", "TMPDIR": str(tmp_path)})
    said = f"{script} {' '.join(args)} ({done.returncode}, {time.monotonic() - began:.0f} s)" \
           f":\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    for figure in printed:
        assert re.search(figure, done.stdout), f"{figure!r} not printed by {said}"
    left = sorted(p.name for p in tmp_path.iterdir())  # a run that ended well keeps nothing
    assert not left, f"{script} left {left} in its temporary directory"
