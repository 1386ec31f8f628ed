"""Every plugin's tests live beside its kind: ``plugins/<module>.py`` has
``tests/unit/controllers/scheduler/plugins/test_<module>.py``."""

from __future__ import annotations

from pathlib import Path

import berth.controllers.scheduler.plugins as plugins

NOT_PLUGINS = {"__init__"}  # the registry


def test_each_plugin_module_has_its_test_module() -> None:
    sources = Path(plugins.__file__).parent
    modules = {p.stem for p in sources.glob("*.py")} - NOT_PLUGINS
    here = Path(__file__).parent
    missing = sorted(m for m in modules if not (here / f"test_{m}.py").is_file())
    assert len(modules) >= 18 and missing == []
