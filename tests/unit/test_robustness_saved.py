"""A robustness run saved whole and checked again (tests/robustness/saved.py,
``python -m tests.robustness.run --check DIR``): the seed-29 stage-order case, which the
checker once took for a violation, as a saved run — forgiven by the checker as it is,
found again once the fault that forgives it is taken out of the run."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from berth.store import encode, keys
from berth.store.documents import Binding, BindingMeta, BindingSpec, Target
from berth.store.documents.base import ObjectRef
from berth.store.documents.pace import PaceSpec
from tests.robustness import saved
from tests.robustness.faults import Happened
from tests.robustness.history import Event, Sample
from tests.robustness.run import check_again
from tests.robustness.traffic import App


def seed_29() -> saved.Saved:
    """Seed 29 (r-deploy-0012): a's copy of x:6 became available and berth went on to b,
    but a's API stopped before the sampler read a again."""
    binding = Binding(BindingMeta("s", "default"), BindingSpec(
        ObjectRef("Application", "s", "default"), 6,
        [Target("Cluster", c, "default") for c in "abc"]))
    events = [Event(101, "PUT", keys.binding_key("Application", "default", "s"),
                    encode(binding), 101, 0.0),
              Event(102, "PUT", "/berth/v1/applications/default/garbage", b"\xff\xfe", 102,
                    1.0)]  # garbage a fault wrote: kept as it was
    samples = [Sample(113.6, 4, "a", "Deployment", "s", "x:6", available=1),
               Sample(114.4, 5, "b", "Deployment", "s", "x:6", available=0)]
    return saved.Saved(
        seed=29, seconds=120.0, events=events, samples=samples, unreached={5, 6},
        faults=[Happened("cluster", "cluster a's API stopped 12.1 s", 113.9, 149.7)],
        pace=PaceSpec(in_transition=8, per_minute=30), term=90, claims={"a": "p0"},
        apps={"s": App("s", "deploy", 0, strategy="Staged", generation=6)}, deleted={},
        deleted_at={}, planted=set(), wall_t0=1_764_000_000.0, ledger=[])


def test_a_saved_run_reads_back_as_it_was(tmp_path: Path) -> None:
    run = seed_29()
    back = saved.load(saved.save(run, tmp_path / "run"))
    assert back == run
    assert back.events[1].value == b"\xff\xfe"
    assert back.run_time("2025-11-24T16:00:10Z") == pytest.approx(10.0)


def test_the_checker_judges_a_saved_run_again(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    forgiven = saved.save(seed_29(), tmp_path / "forgiven")
    assert saved.check(saved.load(forgiven)) == []
    assert check_again(forgiven) == 0
    assert "violations: 0" in capsys.readouterr().out
    not_cut_off = saved.save(replace(seed_29(), faults=[]), tmp_path / "not-cut-off")
    assert [v.invariant for v in saved.check(saved.load(not_cut_off))] == ["stage-order"]
    assert check_again(not_cut_off) == 1
    assert "stage-order: s: x:6 on b before cluster a had it available" in (
        capsys.readouterr().out)


def test_what_only_the_live_system_saw_is_kept_and_said(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    run = replace(seed_29(), live=["[    0.0 s] crash: propagator-0: a traceback in its log"])
    assert check_again(saved.save(run, tmp_path / "run")) == 1
    assert "found only live, when it ran: 1" in capsys.readouterr().out


def test_a_directory_that_is_no_saved_run_is_named(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"seed": 1}))
    assert check_again(tmp_path) == 2
    assert f"{tmp_path}: not a saved robustness run" in capsys.readouterr().err
