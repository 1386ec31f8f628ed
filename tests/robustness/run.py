"""The robustness run: berth on real servers under seeded traffic and random faults, its
promises checked from the recorded history afterwards (docs/faults.md, "Robustness").

    python -m tests.robustness.run --seed 7 --minutes 30     # a long run
    python -m tests.robustness.run --seed 7 --minutes 2      # the same seed, replayed
    python -m tests.robustness.run --check build/robustness/<run>.run   # checked again

The system is the fault table's (tests/faults/system.py): a three-member etcd, three
kube-apiservers with kwok nodes (cluster b in Pull mode, reached by its two agents),
Prometheus and Kafka, two replicas of every berth process. Traffic
(:mod:`tests.robustness.traffic`) and faults (:mod:`tests.robustness.faults`) each
draw from a random stream of the seed, so a seed replays the same operations and
faults in the same order. After the time given, every fault is healed, the run waits
for the system to converge (within ``--bound`` seconds), and the invariants
(:mod:`tests.robustness.checks`) read the history. The report — faults by kind,
operations, invariants checked, violations — goes to ``build/robustness/``, and the
run itself beside it (:mod:`tests.robustness.saved`: its history, samples and what
else the checks read), passing or not, so that ``--check`` can judge it again; a run
with violations prints its seed and exits 1.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from berth.store import Put, encode, keys
from berth.store.documents.base import Metadata
from berth.store.documents.pace import FLEET, Pace, PaceSpec, PaceWindow
from berth_testkit.servers.etcd import ROOT
from tests.faults.system import System
from tests.robustness import checks, saved
from tests.robustness.faults import Injector
from tests.robustness.history import Foreign, Recorder, Sampler
from tests.robustness.traffic import Traffic

IN_TRANSITION, PER_MINUTE = 8, 30  # the fleet's pace during a run (docs/pace.md)
INVARIANTS = ["binding-regressed", "decision-kept", "outside-term", "outside-claim", "pace",
              "ledger", "never-down", "copy-up", "job-again", "job-twice", "stage-order",
              "rolling", "untouched", "one-owner", "quota", "confined", "depends-first", "final",
              "crash", "history-whole"]


@dataclass
class Report:
    seed: int
    seconds: float
    ops: dict[str, int]
    faults: dict[str, int]
    happened: list[str]
    converged_in: float | None
    checked: dict[str, int]
    violations: list[str] = field(default_factory=list)

    def text(self) -> str:
        lines = [f"robustness run, seed {self.seed}: {self.seconds:.0f} s of traffic and faults",
                 f"operations: {sum(self.ops.values())} "
                 + ", ".join(f"{k} {v}" for k, v in sorted(self.ops.items())),
                 f"faults: {sum(self.faults.values())} "
                 + ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())),
                 "converged after the last fault in "
                 + (f"{self.converged_in:.1f} s" if self.converged_in is not None
                    else "NOT within the bound"),
                 "invariants checked: " + ", ".join(INVARIANTS),
                 "over: " + ", ".join(f"{k} {v}" for k, v in self.checked.items()),
                 f"violations: {len(self.violations)}"]
        lines += ["  " + v for v in self.violations]
        lines += ["faults, in order:"] + ["  " + h for h in self.happened]
        return "\n".join(lines) + "\n"


def fleet_pace(seconds: float) -> PaceSpec:
    """The fleet's pace for a run of ``seconds`` from now: tight enough to hold some of
    the traffic's optional moves back, and a one-minute window (no optional change) every
    five minutes — the first at the first whole minute at least ten seconds in, the last
    ending at least ten seconds before the traffic does (a run of two minutes holds one
    two times in three)."""
    now = datetime.now(UTC)
    first = (now + timedelta(seconds=70)).replace(second=0, microsecond=0)
    windows = []
    while first + timedelta(minutes=1) <= now + timedelta(seconds=seconds - 10):
        end = first + timedelta(minutes=1)
        windows.append(PaceWindow(start=f"{first:%H:%M}",
                                  end="24:00" if end.day != first.day else f"{end:%H:%M}"))
        first += timedelta(minutes=5)
    return PaceSpec(in_transition=IN_TRANSITION, per_minute=PER_MINUTE, windows=windows)


def run(seed: int, seconds: float, *, workdir: Path, bound: float = 240.0,
        interval: float = 0.3, log: Callable[[str], None] = print) -> Report:
    system = System(workdir, log=log)
    try:
        system.start()
        return _run(system, seed, seconds, bound=bound, interval=interval, log=log)
    finally:
        system.stop()


def _run(system: System, seed: int, seconds: float, *, bound: float, interval: float,
         log: Callable[[str], None]) -> Report:
    t0 = time.monotonic()
    recorder = Recorder(system.db, t0)
    election = system.db.get(keys.lease_key("scheduler"))  # the term the history begins in
    start = election.mod_revision + 1 if election else system.db.revision() + 1
    claims = {kv.key[len(checks.CLAIMS):]: checks.holder(kv.value)  # held when it begins
              for kv in system.db.list_prefix(checks.CLAIMS, revision=start - 1)[0]}
    recorder.start(start)
    pace = fleet_pace(seconds)
    system._commit([Put(keys.resource_key("Pace", FLEET), encode(
        Pace(Metadata(name=FLEET), pace)), None)])
    foreign = Foreign(system.clusters)
    for name in system.clusters:
        foreign.plant(name)
    sampler = Sampler(system.clusters, t0)
    sampler.start()
    traffic = Traffic(system, random.Random(f"traffic {seed}"),
                      team_rng=random.Random(f"team {seed}"))
    system._commit(traffic.tenancy())
    injector = Injector(system, random.Random(f"faults {seed}"), t0, log=log,
                        compact_below=recorder.read_up_to, back_empty=foreign.plant)
    stop = threading.Event()
    harness: list[str] = []

    def drive() -> None:
        while not stop.wait(interval):
            try:
                traffic.step()
            except Exception as exc:  # the harness's own failure: reported, not hidden
                harness.append(f"{type(exc).__name__}: {exc}")
                if len(harness) > 20:
                    return

    driver = threading.Thread(target=drive, daemon=True, name="traffic")
    faulter = threading.Thread(target=injector.run, args=(stop,), daemon=True, name="faults")
    driver.start()
    faulter.start()
    time.sleep(seconds)
    stop.set()
    driver.join()
    faulter.join()
    crashed = injector.heal()
    healed = time.monotonic()
    log(f"[{healed - t0:7.1f} s] every fault healed; waiting for the system to converge")
    wrong: list[str] = []
    converged: float | None = None
    said = 0.0
    while time.monotonic() - healed < bound:
        wrong = checks.final(system, traffic)
        if not wrong:
            converged = time.monotonic() - healed
            break
        if time.monotonic() - said >= 10:  # what the wait is for, in the run's log
            said = time.monotonic()
            log(f"[{said - t0:7.1f} s] not converged: {len(wrong)} wrong, e.g. {wrong[0]}")
        time.sleep(2)
    time.sleep(2)
    sampler.stop()
    recorder.close()
    events = recorder.snapshot()
    faults = injector.happened
    recorded, unreadable = checks.ledger_now(system.db, traffic.apps)
    # what only the live system could tell, checked now and kept as found
    live = checks.check_processes(system, crashed)
    live += [checks.Violation("final", w.split(":", 1)[0], 0.0,
                              w.split(":", 1)[-1].strip() + f" ({bound:g} s after the "
                              "last fault)") for w in wrong]
    if recorder.error:
        live.append(checks.Violation("history-whole", "the recorder", 0.0, recorder.error))
    live += [checks.Violation("harness", "traffic", 0.0, h) for h in harness]
    live += [checks.Violation("harness", "faults", 0.0, e) for e in injector.errors]
    run = saved.Saved(
        seed=seed, seconds=seconds, events=events, samples=sampler.samples,
        unreached=sampler.unreached, faults=faults, pace=pace,
        term=election.create_revision if election else 0, claims=claims,
        apps=dict(traffic.apps), deleted=dict(traffic.deleted),
        deleted_at={n: at - t0 for n, at in traffic.deleted_at.items()},
        planted=foreign.planted(), wall_t0=time.time() - (time.monotonic() - t0),
        ledger=recorded, ledger_problems=unreadable, live=[v.line() for v in live])
    saved.save(run, system.workdir / "run")  # every run, to be checked again (--check)
    violations = saved.check(run) + live
    _, pace_seen = checks.check_pace(events, faults, pace)
    n_bindings = len(checks.bindings(events))
    return Report(
        seed=seed, seconds=seconds, ops=dict(traffic.ops), faults=dict(injector.kinds),
        happened=[f"{h.began:7.1f} to {h.ended:7.1f} s  {h.what}" for h in faults],
        converged_in=converged,
        checked={"Binding writes": n_bindings, "etcd events": len(events),
                 "cluster samples": len(sampler.samples),
                 "samples of the foreign ConfigMap": sum(
                     1 for x in sampler.samples if x.kind == "ConfigMap"),
                 "thieves": sum(1 for a in list(traffic.apps.values())
                                + list(traffic.deleted.values()) if a.shape == "thief"),
                 **pace_seen,
                 "pace windows": len(pace.windows),
                 "live applications": len(traffic.apps),
                 "deleted applications": len(traffic.deleted),
                 "the team's applications, live and deleted": len(traffic.team) + len(
                     traffic.team_deleted),
                 **{f"seconds cluster {c} was cut off (copies there forgiven)": n
                    for c, n in checks.cut_off_seconds(faults, healed - t0).items()}},
        violations=[v.line() for v in violations])


def keep(workdir: Path, where: Path) -> Path:
    """The saved run a run left in ``workdir``, moved to ``where`` (kept, pass or fail)."""
    shutil.move(workdir / "run", where)
    return where


def check_again(where: Path) -> int:
    """Check a saved run again: its violations (and those only the live system could
    see, as found then); exit 1 if there are any."""
    try:
        again = saved.load(where)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    found = [v.line() for v in saved.check(again)]
    print(f"saved run {where}: seed {again.seed}, {again.seconds:.0f} s, "
          f"{len(again.events)} etcd events, {len(again.samples)} cluster samples")
    print(f"violations: {len(found)}" + "".join(f"\n  {v}" for v in found))
    if again.live:
        print(f"found only live, when it ran: {len(again.live)}"
              + "".join(f"\n  {v}" for v in again.live))
    return 1 if found or again.live else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.robustness.run",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--bound", type=float, default=240.0,
                   help="seconds after the last fault to converge within (default 240)")
    p.add_argument("--out", type=Path, default=ROOT / "build" / "robustness")
    p.add_argument("--check", type=Path, metavar="DIR",
                   help="run nothing: check a saved run again (a run's .run directory)")
    args = p.parse_args(argv)
    if args.check is not None:
        return check_again(args.check)
    # stopped (SIGTERM, as timeout does): stop the servers and berth on the way out
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.strftime("%Y%m%d-%H%M%S")
    print(f"robustness run: seed {args.seed}, {args.minutes:g} minutes", flush=True)
    base = args.out / f"{began}-seed{args.seed}"
    work = base.with_suffix(".work")  # the processes' logs: kept on failure
    work.mkdir()
    report = run(args.seed, args.minutes * 60, workdir=work, bound=args.bound,
                 log=lambda line: print(line, flush=True))
    kept = keep(work, base.with_suffix(".run"))
    if not report.violations:
        shutil.rmtree(work, ignore_errors=True)
    base.with_suffix(".txt").write_text(report.text())
    base.with_suffix(".json").write_text(json.dumps(asdict(report), indent=1))
    print(report.text())
    print(f"report: {base.with_suffix('.txt')}; the run, to check again: --check {kept}")
    if report.violations:
        print(f"VIOLATIONS: replay with --seed {args.seed}; the logs and the history are in "
              f"{work}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
