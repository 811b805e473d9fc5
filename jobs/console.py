"""What a command prints, and where: results on stdout (text, or one JSON document with
``--json``), progress and messages on stderr (none of it with ``--quiet``, but errors), and the
libraries' own output kept out of the terminal unless ``--verbose``.

Ray, Lance, MuPDF and ONNX Runtime write to the process's standard error from C++ and Rust as
well as from Python, and Ray's child processes inherit it. ``Console.libraries_to_log`` points
file descriptor 2 at a log file for the length of a command (the command's own lines go to the
terminal through a duplicate of the original descriptor), names the file when the command fails
and removes it when the command succeeds. Only the ``bookindex`` command turns this on
(``capture``); a job's ``main`` called in-process (a test) leaves the descriptors alone.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, TextIO

from bookindex.pipelines.run_stats import StageProgress

# The stages a user sees, in the words of the progress lines (run_stats.StageProgress.stage);
# the driver's other phases (recovery, search indexes, ...) are quick and stay silent.
STAGE_LABELS = {
    "identify": "identify",
    "plan": "probe",
    "parse": "parse",
    "enrich": "enrich",
    "write_nodes": "write",
    "write_entities": "entities",
}
PLAIN_EVERY_S = 10.0  # without a terminal, a running stage's line at most this often


def one_line(text: Any) -> str:
    """``text`` with its control characters (a newline in a file name) written as escapes, so
    that a name read from the input (a file name, a PDF's title, a heading) prints as one line
    and cannot forge the lines around it."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in str(text))


class Console:
    """The output of one command. ``json_out``: results as JSON on stdout; ``quiet``: no
    progress or notes on stderr; ``verbose``: the libraries' own output shown as it comes."""

    def __init__(
        self,
        json_out: bool = False,
        quiet: bool = False,
        verbose: bool = False,
        out: TextIO | None = None,
        err: TextIO | None = None,
        capture: bool = False,
    ) -> None:
        self.json_out, self.quiet, self.verbose = json_out, quiet, verbose
        self.capture = capture  # libraries_to_log redirects (the ``bookindex`` command sets it)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.log_path: Path | None = None
        self.failed = False  # a command that ends with an error keeps its log (libraries_to_log)
        self._live = False  # a running stage's line is on the terminal, not ended
        self._last: dict[str, float] = {}

    # ---- messages ---------------------------------------------------------------------------
    def result(self, text: str = "", data: Any = None) -> None:
        """A command's result: ``data`` as JSON with ``--json``, else ``text``."""
        if self.json_out:
            print(json.dumps(data, indent=2, default=str), file=self.out, flush=True)
        elif text:
            print(text, file=self.out, flush=True)

    def note(self, text: str) -> None:
        """Progress or context on stderr, not with ``--quiet``."""
        if not self.quiet:
            self._end_live()
            print(text, file=self.err, flush=True)

    def warn(self, text: str) -> None:
        """A warning the user should act on: on stderr even with ``--quiet``."""
        self._end_live()
        print(f"warning: {text}", file=self.err, flush=True)

    def error(self, text: str) -> None:
        self._end_live()
        print(f"error: {text}", file=self.err, flush=True)

    # ---- progress ---------------------------------------------------------------------------
    @property
    def progress_stream(self) -> TextIO:
        """Where a job's own progress lines go: stderr, or nowhere with ``--quiet``."""
        return io.StringIO() if self.quiet else self.err

    def progress(self, event: StageProgress) -> None:
        """One line per stage: rewritten in place on a terminal while the stage runs; otherwise
        printed when its first documents are done and then at most every ``PLAIN_EVERY_S``
        seconds; and once more when it ends."""
        label = STAGE_LABELS.get(event.stage)
        if self.quiet or label is None:
            return
        line = f"{label:<9} {stage_line(event)}"
        terminal = self.err.isatty()
        if event.finished:
            if terminal and self._live:
                print(f"\r{line}\033[K", file=self.err, flush=True)
            else:
                print(line, file=self.err, flush=True)
            self._live = False
            return
        if terminal:
            print(f"\r{line}\033[K", end="", file=self.err, flush=True)
            self._live = True
            return
        now = time.monotonic()
        last = self._last.get(event.stage)  # the stage's last line (None: none yet)
        if event.done and (last is None or now - last >= PLAIN_EVERY_S):
            self._last[event.stage] = now
            print(line, file=self.err, flush=True)

    def _end_live(self) -> None:
        if self._live:
            print(file=self.err, flush=True)
            self._live = False

    # ---- the libraries' output --------------------------------------------------------------
    @contextmanager
    def libraries_to_log(self, command: str) -> Iterator[None]:
        """File descriptor 2 into a log file while the block runs (not with ``--verbose``);
        this console's own lines keep the terminal. The file is named and kept when the block
        raises or the command set ``failed``; otherwise it is removed."""
        if self.verbose or not self.capture:
            yield
            return
        folder = Path(os.environ.get("BOOKINDEX_LOG_DIR") or tempfile.gettempdir()) / "bookindex"
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.log_path = folder / f"{command}-{stamp}-{os.getpid()}.log"
        sys.stderr.flush()
        saved = os.dup(2)
        own = os.fdopen(os.dup(saved), "w", buffering=1, encoding="utf-8", errors="replace")
        previous_err = self.err
        self.err = own
        keep = True
        try:
            with open(self.log_path, "ab", buffering=0) as log:
                os.dup2(log.fileno(), 2)
                try:
                    yield
                    keep = self.failed
                finally:
                    sys.stderr.flush()
                    os.dup2(saved, 2)
        finally:
            os.close(saved)
            own.flush()
            self.err = previous_err
            own.close()
            if keep:
                self.note(f"the libraries' output of this run: {self.log_path}")
            else:
                self.log_path.unlink(missing_ok=True)


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """--json, --quiet and --verbose, the same on every command."""
    group = parser.add_argument_group("output")
    group.add_argument("--json", action="store_true", help="print the result as JSON (stdout)")
    group.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines; only results and errors"
    )
    group.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show Ray's, Lance's and the models' own log lines and progress as they come",
    )


def job_parser(job: ModuleType) -> argparse.ArgumentParser:
    """A job module's own parser (``python -m bookindex.jobs.<name>``): its docstring, its
    ``add_arguments`` and the output flags, named after its ``bookindex`` subcommand."""
    parser = argparse.ArgumentParser(
        prog=f"bookindex {job.COMMAND}",
        description=job.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    job.add_arguments(parser)
    add_output_arguments(parser)
    return parser


def run_job(job: ModuleType, argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` with the job's parser and run it; the exit code."""
    args = job_parser(job).parse_args(argv)
    return job.run(args, console_of(args))


def console_of(args: argparse.Namespace) -> Console:
    return Console(
        json_out=getattr(args, "json", False),
        quiet=getattr(args, "quiet", False),
        verbose=getattr(args, "verbose", False),
    )


def stage_line(event: StageProgress) -> str:
    """``3/120 documents, 812 pages, 14.2 pages/s, ~3m10s left`` (running) or ``120
    documents, 9,312 pages, 15.0 pages/s, 10m20s`` (done); a driver phase: what it counted."""
    if event.stage in ("parse", "enrich"):
        counted = f"{event.done}/{event.total}" if event.total is not None else f"{event.done}"
        parts = [f"{counted} documents"]
        if event.pages:
            parts.append(f"{event.pages:,} pages")
            if event.seconds > 0 and event.done:
                parts.append(f"{event.pages / event.seconds:.1f} pages/s")
        if event.finished:
            parts.append(duration(event.seconds))
        elif event.done and event.total:
            left = event.seconds / event.done * (event.total - event.done)
            parts.append(f"~{duration(left)} left")
        else:
            parts.append(f"{duration(event.seconds)} so far")
        return ", ".join(parts)
    facts = event.facts
    what = {
        "identify": lambda: f"{facts.get('rows_out', 0):,} files",
        "plan": lambda: (
            f"{facts.get('rows_out', 0):,} documents"
            + (f", {facts['ocr_pages']:,} pages to OCR" if facts.get("ocr_pages") else "")
        ),
        "write_nodes": lambda: f"{facts.get('rows_out', 0):,} nodes",
        "write_entities": lambda: f"{facts.get('rows_out', 0):,} entities",
    }.get(event.stage, lambda: "done")()
    return f"{what}, {duration(event.seconds)}"


def duration(seconds: float) -> str:
    """``0.4s``, ``42s``, ``3m10s``, ``2h05m``."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"
