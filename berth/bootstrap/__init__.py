"""Seeding etcd from YAML, in the manner of Krake's ``krake_bootstrap_db``.

``load`` reads and validates every document first; ``plan`` fills in
metadata and decides create or replace; ``write`` writes all or nothing.
"""

from berth.bootstrap.load import Loaded, LoadErrors, ignored, load
from berth.bootstrap.write import Planned, Result, plan, write

__all__ = ["LoadErrors", "Loaded", "Planned", "Result", "ignored", "load", "plan", "write"]
