"""A robustness run kept whole: its history, its samples and everything else the checks
read of it, written when the run ends — every run, not only a failing one — so that
the checks can be run again on it (``python -m tests.robustness.run --check DIR``), as
etcd's robustness reports allow: a checker's fix is tried on the runs that found it.

A saved run is a directory::

    run.json           the seed, the faults, the pace, the claims and term it began
                       with, the applications (live and deleted), the ledger at the end
    history.jsonl.gz   every write under /berth/ from the run's start, as recorded
    samples.jsonl.gz   every sample of the clusters, and the passes one did not answer

What only a live system can say (``final``: where everything converged; ``crash``:
the processes' logs) is checked when the run ends and kept in ``run.json`` as it was
found; :func:`check` runs every other invariant again.
"""

from __future__ import annotations

import base64
import gzip
import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

from berth.store.documents.pace import PaceSpec
from tests.robustness import checks
from tests.robustness.faults import Happened
from tests.robustness.history import Event, Sample
from tests.robustness.traffic import App


@dataclass
class Saved:
    """What the checks read of one run."""

    seed: int
    seconds: float
    events: list[Event]
    samples: list[Sample]
    unreached: set[int]
    faults: list[Happened]
    pace: PaceSpec
    term: int  # the scheduler leader's term when the history began
    claims: dict[str, str]  # cluster → the propagator replica holding it then
    apps: dict[str, App]  # live at the end
    deleted: dict[str, App]
    deleted_at: dict[str, float]  # seconds since the run began
    planted: set[str]  # uids of the foreign ConfigMap, as made by someone else
    wall_t0: float  # the wall clock (epoch seconds) when the run began
    ledger: list[tuple[str, str]]  # (application, record id): Placed and Moved in etcd at the end
    ledger_problems: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)  # violations only a live system could see

    def run_time(self, stamp: str) -> float:
        """An RFC 3339 time a cluster wrote in seconds since the run began."""
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() - self.wall_t0


def check(run: Saved) -> list[checks.Violation]:
    """Every invariant that reads only what the run recorded, on ``run``."""
    traffic = _Traffic(run.apps, run.deleted)
    paced, _ = checks.check_pace(run.events, run.faults, run.pace)
    return (checks.check_bindings(run.events, run.faults, run.term)
            + checks.check_claims(run.events, run.faults, run.claims)
            + checks.check_ledger(run.events, run.apps, set(run.ledger), run.ledger_problems)
            + paced
            + checks.check_never_down(run.samples, run.unreached, run.events, traffic,
                                      run.faults, run.deleted_at)
            + checks.check_copies_up(run.samples, run.unreached, run.events, traffic,
                                     run.faults, run.deleted_at)
            + checks.check_jobs(run.samples, run.faults, run.run_time)
            + checks.check_jobs_twice(run.samples, run.faults)
            + checks.check_stages(run.samples, run.events, traffic, run.faults)
            + checks.check_depends_first(run.samples, run.events, traffic)
            + checks.check_rollout_steps(run.events, traffic, run.pace, run.faults)
            + checks.check_foreign(run.samples, run.unreached, run.planted, run.faults)
            + checks.check_team(run.events, run.faults))


@dataclass
class _Traffic:
    """What the checks read of :class:`~tests.robustness.traffic.Traffic`."""

    apps: dict[str, App]
    deleted: dict[str, App]


def save(run: Saved, where: Path) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    head = {
        "seed": run.seed, "seconds": run.seconds, "unreached": sorted(run.unreached),
        "faults": [asdict(f) for f in run.faults],
        "pace": msgspec.to_builtins(run.pace), "term": run.term, "claims": run.claims,
        "apps": [asdict(a) for a in run.apps.values()],
        "deleted": [asdict(a) for a in run.deleted.values()],
        "deleted_at": run.deleted_at, "planted": sorted(run.planted), "wall_t0": run.wall_t0,
        "ledger": [list(r) for r in sorted(run.ledger)],
        "ledger_problems": run.ledger_problems, "live": run.live}
    (where / "run.json").write_text(json.dumps(head, indent=1) + "\n")
    _write_lines(where / "history.jsonl.gz", (_event(e) for e in run.events))
    _write_lines(where / "samples.jsonl.gz", (asdict(s) for s in run.samples))
    return where


def load(where: Path) -> Saved:
    """A saved run (ValueError naming the file and what is wrong with it)."""
    try:
        head = json.loads((where / "run.json").read_text())
        events = [_event_of(d) for d in _read_lines(where / "history.jsonl.gz")]
        samples = [Sample(**d) for d in _read_lines(where / "samples.jsonl.gz")]
        return Saved(
            seed=head["seed"], seconds=head["seconds"], events=events, samples=samples,
            unreached=set(head["unreached"]), faults=[Happened(**f) for f in head["faults"]],
            pace=msgspec.convert(head["pace"], PaceSpec), term=head["term"],
            claims=head["claims"], apps={a["name"]: App(**a) for a in head["apps"]},
            deleted={a["name"]: App(**a) for a in head["deleted"]},
            deleted_at=head["deleted_at"], planted=set(head["planted"]),
            wall_t0=head["wall_t0"], ledger=[(n, i) for n, i in head["ledger"]],
            ledger_problems=head["ledger_problems"], live=head["live"])
    except (OSError, KeyError, TypeError, ValueError, msgspec.ValidationError) as exc:
        raise ValueError(f"{where}: not a saved robustness run: {exc}") from None


def _event(e: Event) -> dict[str, Any]:
    try:
        value: dict[str, str] = {"value": e.value.decode()}
    except UnicodeDecodeError:  # garbage a fault wrote
        value = {"value_b64": base64.b64encode(e.value).decode()}
    return {"revision": e.revision, "type": e.type, "key": e.key, **value,
            "create_revision": e.create_revision, "at": e.at}


def _event_of(d: dict[str, Any]) -> Event:
    value = (d["value"].encode() if "value" in d else base64.b64decode(d["value_b64"]))
    return Event(d["revision"], d["type"], d["key"], value, d["create_revision"], d["at"])


def _write_lines(path: Path, rows: Iterator[dict[str, Any]] | Any) -> None:
    with gzip.open(path, "wt") as f:
        for row in rows:
            f.write(json.dumps(row, separators=(",", ":")) + "\n")


def _read_lines(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)
