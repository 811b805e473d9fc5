"""The unit tier: plain Python over operators/ (and pipelines/ helpers that start nothing),
no Ray. A run of this tier alone fails if anything in it imported Ray."""

from __future__ import annotations

import sys
from pathlib import Path

UNIT = Path(__file__).resolve().parent


def pytest_sessionfinish(session, exitstatus) -> None:
    args = [Path(a.split("::")[0]).resolve() for a in session.config.args]
    unit_only = args and all(a.is_relative_to(UNIT) for a in args)
    if unit_only and "ray" in sys.modules and exitstatus == 0:
        print("\nunit tier: Ray was imported; unit tests must run without it", file=sys.stderr)
        session.exitstatus = 1
