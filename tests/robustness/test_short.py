"""The robustness run, short, in the suite: fixed seeds for a few minutes each
(docs/faults.md, "Robustness: random faults under traffic"). A long run, with a new
seed each time, is ``scripts/robustness.sh --minutes 30``.

Each seed was chosen because, in two minutes, it begins every kind of fault — a
cluster's API back empty among them (the seed draws the faults in order: what a seed
begins can be listed without running it); a violation fails the test with the
report, whose seed replays it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from berth_testkit.servers.etcd import ROOT
from tests.robustness.faults import KINDS
from tests.robustness.run import keep, run

SEEDS = [(14, 2.0), (29, 2.0)]  # (seed, minutes of traffic and faults)
OUT = ROOT / "build" / "robustness"


@pytest.mark.parametrize(("seed", "minutes"), SEEDS)
def test_a_short_robustness_run_keeps_every_promise(seed: int, minutes: float,
                                                    tmp_path: Path) -> None:
    with open(tmp_path / "run.log", "a") as progress:  # beside the processes' logs
        report = run(seed, minutes * 60, workdir=tmp_path,
                     log=lambda line: print(line, file=progress, flush=True))
    OUT.mkdir(parents=True, exist_ok=True)
    base = OUT / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{seed}-suite"
    base.with_suffix(".txt").write_text(report.text())
    base.with_suffix(".json").write_text(json.dumps(asdict(report), indent=1))
    kept = keep(tmp_path, base.with_suffix(".run"))  # pass or fail: to be checked again
    assert not report.violations, (
        f"replay with scripts/robustness.sh --seed {seed} --minutes {minutes:g}; check "
        f"again with python -m tests.robustness.run --check {kept}; the report "
        f"({base.with_suffix('.txt')}):\n{report.text()}")
    assert report.converged_in is not None
    assert set(KINDS) <= set(report.faults), f"began only {report.faults}"
    assert sum(report.ops.values()) >= minutes * 60 / 0.3 * 0.5, report.ops  # traffic ran

