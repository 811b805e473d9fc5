"""Input discovery: the files that directories, files and globs name, found in linear time.

The rules (docs/indexing.md, "Input rules"):

- a directory is searched recursively for ``*.pdf`` (any case); a glob (``**`` included) is
  matched against the paths under its fixed prefix; a file named directly is taken whatever
  its name (``.jsonl``: a passage corpus).
- every real directory is searched once, whatever the number of symlinks that lead to it:
  discovery is linear in the number of entries, and two symlink loops cost two entries, not an
  exponential walk (``glob.glob(..., recursive=True)`` follows every loop to its depth limit).
- a symlink loop (a link to a directory that contains it, or a link that resolves to itself),
  a broken symlink, a special file named like an input (FIFO, socket, device: never opened, a
  FIFO would block) and a path that is not valid UTF-8 are each a ``Problem`` with the reason.
- a document's ``uri`` is its resolved path (two names of one file are one input); a problem
  is keyed by the path as named (a symlink to ``/proc/self/mem`` resolves to a new path every
  run, and would otherwise add a failure row per run).
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

from bookindex.operators.parsing.probe import PDF_SUFFIX, Problem

_GLOB_MAGIC = re.compile(r"[*?[]")
MISSING = "no such file, directory or glob match"  # an input that names nothing
EMPTY = "no PDF files found"  # a directory without PDFs
_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


@dataclass
class Discovered:
    """Files found (resolved path → the path as first named) and problems met on the way."""

    files: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    matched: int = 0  # regular files accepted (a file named twice counts twice)
    _reported: set[tuple[str, str]] = field(default_factory=set)

    def problem(self, path: str, error: str) -> None:
        key = (printable(path), error)
        if key not in self._reported:  # one path named by two inputs: one problem
            self._reported.add(key)
            self.problems.append(Problem(key[0], "discover", error))


def printable(path: str) -> str:
    """A path as valid UTF-8 text: undecodable bytes of its name written as ``\\xNN``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _valid_utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def discover(inputs: list[str]) -> Discovered:
    """The regular files named by ``inputs`` (directories, files, globs) and the problems."""
    found = Discovered()
    for item in inputs:
        named = os.path.abspath(item)
        if os.path.isdir(named):
            before = found.matched
            _walk(named, _is_pdf_name, found, report_links=True)
            if found.matched == before:
                found.problem(named, EMPTY)
        elif os.path.lexists(named) and not _GLOB_MAGIC.search(item):
            _take(named, found, named_directly=True)
        else:
            before = found.matched
            _glob(item, found)
            if found.matched == before:
                found.problem(item, MISSING)
    return found


def _is_pdf_name(path: str) -> bool:
    return path.lower().endswith(PDF_SUFFIX)


def _take(path: str, found: Discovered, named_directly: bool = False) -> None:
    """Add ``path`` when it is (or links to) a regular file with a UTF-8 name; else a
    problem."""
    if not _valid_utf8(path):
        found.problem(path, "file name is not valid UTF-8: rename the file to index it")
        return
    try:
        info = os.stat(path)
    except OSError as exc:
        found.problem(path, _link_error(path, exc))
        return
    if stat.S_ISREG(info.st_mode):
        real = os.path.realpath(path)
        if _valid_utf8(real):
            found.files.setdefault(real, path)
            found.matched += 1
        else:
            found.problem(path, "resolves to a path that is not valid UTF-8: rename it")
        return
    if stat.S_ISDIR(info.st_mode) and not named_directly:
        return
    kind = next((what for test, what in _SPECIAL if test(info.st_mode)), "not a regular file")
    found.problem(path, f"not a regular file: {kind}; not read")


def _link_error(path: str, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop: the link resolves to itself"
    if exc.errno == errno.ENOENT and os.path.islink(path):
        return f"broken symlink: its target {printable(os.readlink(path))} does not exist"
    return f"cannot read: {exc.strerror}"


def _walk(root: str, wanted: Callable[[str], bool], found: Discovered, report_links: bool) -> None:
    """Every entry under ``root`` once: each real directory is listed once (keyed by device
    and inode), symlinked directories included; a link back into its own ancestry is a loop.
    ``report_links``: broken and looping links are problems even when not ``wanted``."""
    top = os.stat(root)
    seen = {(top.st_dev, top.st_ino)}
    stack = [root]
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as listing:
                entries = sorted(listing, key=lambda e: e.name, reverse=True)
        except OSError as exc:
            found.problem(directory, f"cannot list directory: {exc.strerror}")
            continue
        for entry in entries:
            path = entry.path
            if entry.is_symlink():
                try:
                    info = os.stat(path)
                except OSError as exc:
                    if report_links or wanted(path):
                        found.problem(path, _link_error(path, exc))
                    continue
                if stat.S_ISDIR(info.st_mode):
                    key = (info.st_dev, info.st_ino)
                    if key in seen:
                        if _is_ancestor(os.path.realpath(path), os.path.realpath(directory)):
                            found.problem(path, "symlink loop: links to a directory above it")
                        continue  # searched already, under another name
                    seen.add(key)
                    stack.append(path)
                    continue
            elif entry.is_dir(follow_symlinks=False):
                info = entry.stat(follow_symlinks=False)
                seen.add((info.st_dev, info.st_ino))
                stack.append(path)
                continue
            if wanted(path):
                _take(path, found)


def _is_ancestor(candidate: str, path: str) -> bool:
    return path == candidate or path.startswith(candidate.rstrip(os.sep) + os.sep)


def _glob(pattern: str, found: Discovered) -> None:
    """A glob: ``**`` matches any number of directories; every other part as ``glob``
    does. Patterns with ``**`` are matched during one linear walk of their fixed prefix."""
    if "**" not in pattern:
        for match in sorted(glob.glob(pattern)):
            if not os.path.isdir(match):
                _take(os.path.abspath(match), found)
        return
    absolute = os.path.abspath(pattern)
    parts = absolute.split(os.sep)
    fixed = next(i for i, p in enumerate(parts) if _GLOB_MAGIC.search(p))
    base = os.sep.join(parts[:fixed]) or os.sep
    if not os.path.isdir(base):
        return
    regex = re.compile(_translate(absolute))
    _walk(base, lambda p: regex.fullmatch(p) is not None, found, report_links=False)


def _translate(pattern: str) -> str:
    """A glob with ``**`` as a regular expression over whole paths."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def unusable_inputs(inputs: list[str]) -> str | None:
    """Why these inputs cannot make an index job, checked before any work: an input that names
    nothing (a path that does not exist, a glob that matches nothing), or no file at all to
    index among them; None when they can. (A directory without PDFs beside inputs that have
    files stays a ``discover`` failure row of the run, as it would be on a later scheduled
    run.)"""
    found = discover(inputs)
    missing = [p.uri for p in found.problems if p.error == MISSING]
    if missing:
        return f"no such file, directory or glob match: {', '.join(missing)}"
    if not found.files:
        empty = [p.uri for p in found.problems if p.error == EMPTY] or inputs
        return f"no PDF or JSONL files in: {', '.join(empty)}"
    return None
