#!/usr/bin/env bash
# The robustness run (docs/faults.md, "Robustness"): set up as the test command does, then
# berth on real servers under seeded traffic and random faults for --minutes (30 by
# default), every promise checked from the recorded history; the report goes to
# build/robustness/. A run with violations exits 1 and prints its seed: replay it with
# --seed; check a saved run again with --check DIR. Arguments go to
# `python -m tests.robustness.run` (--seed N --minutes M --bound S, --check DIR).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
source scripts/setup.sh all
exec python -m tests.robustness.run "$@"
