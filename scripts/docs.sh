#!/usr/bin/env bash
# Build docs/ into build/docs (HTML) with Sphinx and MyST; every warning is an error,
# so a link to a page or a section that does not exist fails the build.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"
"$python" -m sphinx -W --keep-going -q -b html "$here/docs" "$here/build/docs" "$@"
echo "docs: $here/build/docs/index.html" >&2
