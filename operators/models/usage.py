"""Token usage of a generative backend: one thread-safe tally per backend, and per-thread
meters that see only the calls made inside them (one question's, while other threads answer
theirs on the same backend).

    tally = UsageTally()                       # backend.tally; backend.usage is tally.totals
    with tally.meter() as used:                # in the thread that makes the calls
        ...                                    # backend.complete(...), each calls tally.add(...)
    used  # {"prompt_tokens": ..., "completion_tokens": ..., "requests": ...}

The counts are the endpoint's own (the ``usage`` of an OpenAI-compatible response, vLLM's
token ids); a request whose response carries no usage counts as a request with 0 tokens.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

METERED = ("prompt_tokens", "completion_tokens", "requests")


def no_usage() -> dict[str, int]:
    """A meter's reading before any call (and a backend without a tally's)."""
    return dict.fromkeys(METERED, 0)


class UsageTally:
    """Totals over the backend's life (``totals``, keys ``METERED`` plus any other counted
    key, e.g. ``embedding_tokens``) and the meters open in each thread."""

    def __init__(self, *extra: str) -> None:
        self.totals: dict[str, int] = {**no_usage(), **dict.fromkeys(extra, 0)}
        self._lock = threading.Lock()
        self._local = threading.local()

    def add(self, **counts: int) -> None:
        """Count one call's numbers in the totals and in every meter open in this thread."""
        with self._lock:
            for key, value in counts.items():
                self.totals[key] = self.totals.get(key, 0) + int(value or 0)
        for meter in getattr(self._local, "meters", ()):
            for key, value in counts.items():
                if key in meter:
                    meter[key] += int(value or 0)

    @contextmanager
    def meter(self) -> Iterator[dict[str, int]]:
        """The calls this thread makes inside the block (nested meters each see them)."""
        meters = self._local.__dict__.setdefault("meters", [])
        used = no_usage()
        meters.append(used)
        try:
            yield used
        finally:
            meters[:] = [m for m in meters if m is not used]


@contextmanager
def metered(backend: object) -> Iterator[dict[str, int]]:
    """``backend.tally.meter()`` where the backend keeps a tally; else a reading of zeros."""
    tally = getattr(backend, "tally", None)
    if isinstance(tally, UsageTally):
        with tally.meter() as used:
            yield used
    else:
        yield no_usage()
