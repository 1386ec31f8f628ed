"""Where a berth process's CPU goes, by stage: a py-spy profile (raw collapsed stacks,
GIL holders: ``diverse_bench.py --profile PREFIX`` writes them) summed per stage.

    python scripts/bench/stages.py PROFILE.txt [--per N] [--us-per-item U]

Each sample is given to the stage of its innermost frame that belongs to one (the
table below, by the file a frame is in): a Binding's encoding inside the binder
counts as encoding, the binder's own lines as binding. ``--per N``: the items (the
Bindings written) the samples were spent on; with ``--us-per-item U`` (the process's
CPU per item, measured apart, as ``diverse_bench.py`` prints it) each stage's share
is also said in microseconds per item.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

# (stage, file patterns): the first stage one of whose patterns a frame's file has.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("decode (msgspec, views)", ("store/codec.py", "msgspec/", "/views.py", "subjects.py")),
    ("encode (documents, ledger records)", ("store/documents/", "json/encoder")),
    ("etcd requests (HTTP, TLS, sockets)", ("berth/http.py", "store/client.py", "ssl.py",
                                             "socket.py", "store/group.py")),
    ("explanation", ("scheduler/outcome.py", "actions/explain.py", "framework/status.py")),
    ("ledger record", ("store/ledger.py", "scheduler/record.py")),
    ("decide (framework, plugins)", ("scheduler/framework/", "scheduler/plugins/",
                                     "scheduler/decide.py")),
    # the placements' indexes (what each decision assumed, the usage, the quotas): kept
    # as decisions are made and echoed, not deciding
    ("cache, assume, snapshot", ("scheduler/cache.py", "scheduler/fleets.py",
                                 "scheduler/overlay.py", "scheduler/readings.py",
                                 "scheduler/decisions.py", "scheduler/ranks.py")),
    ("queue", ("scheduler/queue/", "runtime/workqueue.py")),
    ("bind (batching, transactions)", ("scheduler/binder.py",)),
    ("informer (watch, events)", ("runtime/informer.py", "store/watch.py")),
    ("scheduler loop, sweeps", ("scheduler/scheduler.py", "scheduler/sweep.py",
                                "scheduler/acts.py", "scheduler/antiflap.py")),
    ("logging", ("logging/",)),
)
FRAME = re.compile(r"\(([^():]+):\d+\)$")


def stage_of(stack: str) -> str:
    """The stage of a stack (frames ``func (file:line)`` joined by ';', outermost first)."""
    files = [m.group(1) for f in stack.split(";") if (m := FRAME.search(f.strip()))]
    for file in reversed(files):
        for stage, patterns in STAGES:
            if any(p in file for p in patterns):
                return stage
    return "other (Python itself, threads, idle GIL holders)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("--per", type=int, default=0, help="items the samples were spent on")
    ap.add_argument("--us-per-item", type=float, default=0.0,
                    help="the process's CPU per item (µs), measured apart")
    args = ap.parse_args()
    counts: Counter[str] = Counter()
    with open(args.profile, encoding="utf-8", errors="replace") as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if stack and n.isdigit():
                counts[stage_of(stack)] += int(n)
    total = sum(counts.values()) or 1
    print(f"{total} samples (200 a second: {total / 200:.1f} s of CPU holding the GIL)"
          + (f" over {args.per:,} items" if args.per else ""))
    for stage, samples in counts.most_common():
        share = samples / total
        line = f"  {stage:<48} {share:6.1%}"
        if args.us_per_item:
            line += f"  {share * args.us_per_item:6.1f} µs per item"
        print(line)


if __name__ == "__main__":
    main()
