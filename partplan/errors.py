"""Exceptions raised by partplan.

Every error a user can trigger with bad input is one of these, with a message
that names the file, line or field at fault. Catch :class:`PartplanError` to
catch them all.
"""
from __future__ import annotations

import re
from os import PathLike


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(s: str) -> str:
    """Control characters (ANSI escapes, newlines, bidi overrides) as backslash escapes."""
    return _CONTROL.sub(lambda mt: mt.group(0).encode("unicode_escape").decode("ascii"), s)


class PartplanWarning(UserWarning):
    """Something partplan did that the caller may not expect, though nothing failed (a file format
    that cannot hold all of a graph, ...); the CLI prints it as one ``partplan: warning:`` line."""


class PartplanError(Exception):
    """Base class of every error partplan raises on purpose.

    Its message is one line of printable text: control characters in it
    (an ANSI escape or a newline in a name read from a file) are written as
    backslash escapes, so printing an error never lets a file drive the
    terminal."""

    def __init__(self, *args):
        super().__init__(*(_escape(a) if isinstance(a, str) else a for a in args))


class GraphFormatError(PartplanError, ValueError):
    """A graph file (or in-memory graph input) is malformed.

    Parameters
    ----------
    problem : what is wrong, in words.
    path : the file, if any.
    line : 1-based line number in the file, if known.
    field : name of the field or column, if relevant.
    """

    def __init__(self, problem: str, path: str | PathLike | None = None,
                 line: int | None = None, field: str | None = None):
        self.problem = problem
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        place = ":".join(x for x in (self.path, None if line is None else f"line {line}") if x is not None)
        what = None if field is None else f"field {field!r}"
        prefix = f"{place} ({what})" if place and what else (place or what or "")   # FILE:line N (field 'x')
        super().__init__(f"{prefix}: {problem}" if prefix else problem)


class SizeLimitError(GraphFormatError):
    """A size read from a file (a header's vertex or entry count, an array
    shape, the largest vertex id) would need more memory than the budget
    (``PARTPLAN_MAX_BYTES``, default a fraction of the machine's memory);
    raised before anything is allocated."""


class PartitionError(PartplanError, ValueError):
    """A partition is invalid (wrong length, part ids out of range, k > n, ...)
    or a partitioner backend failed."""


class PlanError(PartplanError):
    """A communication plan is corrupted, truncated, stale, of an unknown
    version, or was built for another graph."""


class DatasetError(PartplanError):
    """A dataset is unknown, could not be fetched, or failed its checksum."""


class BackendUnavailableError(PartplanError, NotImplementedError):
    """An option names a backend or feature that is not available (not
    installed, or not implemented): raised instead of silently ignoring it."""


class OutputPathError(PartplanError, ValueError):
    """An output path cannot be written: its folder is missing, not a folder or
    not writable, the name is a folder where a file is expected (or a file or
    non-empty folder where a new folder is expected), or its suffix names no
    format the command writes. Raised before any expensive work."""


class OptionError(PartplanError, ValueError):
    """An option has a value outside its domain: an unknown objective, dtype,
    sampler or preset, a feature width f < 1, a negative time limit, a θ or δ
    out of range. Named after the option; raised before any work."""


class UnknownOptionError(OptionError, BackendUnavailableError):
    """An option name or choice not known where it was given (a typo such as ``imbalence=``, an
    option another engine takes, an unknown model or ownership): a bad argument (an
    :class:`OptionError`, so a ``ValueError``) and, as an unavailable engine or feature is, a
    :class:`BackendUnavailableError`."""
