"""Progress of a long evaluation run: questions done, rate and time left, one line per
report (to stderr, so the results on stdout stay clean).

    progress = Progress("zoom", total=1000)
    for batch in batches:
        ...
        progress.done(len(batch))   # "zoom: 64/1000 questions, 21.3 q/s, ~44 s left"
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(
        self, label: str, total: int, stream: TextIO | None = None, every_s: float = 5.0
    ) -> None:
        self.label, self.total, self.count = label, total, 0
        self.stream = stream or sys.stderr
        self.every_s = every_s
        self.started = self._last = time.perf_counter()

    def line(self) -> str:
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        rate = self.count / elapsed
        left = (self.total - self.count) / rate if rate > 0 else float("inf")
        return (
            f"{self.label}: {self.count}/{self.total} questions, {rate:.1f} q/s, ~{left:.0f} s left"
        )

    def done(self, n: int = 1) -> None:
        """``n`` more questions answered; a line at most every ``every_s`` seconds, and at
        the end."""
        self.count += n
        now = time.perf_counter()
        if self.count >= self.total or now - self._last >= self.every_s:
            self._last = now
            print(self.line(), file=self.stream, flush=True)
