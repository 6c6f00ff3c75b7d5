"""Untrusted text from files: JSON with limits, names, terminal output.

A file is input like any other: anyone who edits it can re-sign it (the
checksums only catch accidents). The JSON of a manifest, a shard's metadata
or a foreign partition's config is parsed by :func:`load_json` (depth and integer
length bounded). Strings from files never become paths
(:func:`plain_name_problem`) and are escaped before they reach a terminal
(:func:`printable`).

Every check here is vectorized (one ``min``/``max``/``sum`` pass over an
array) or works on the manifest's small lists; nothing touches the whole
graph.
"""
from __future__ import annotations

import re
from typing import Any

from .._env import source_date_epoch  # noqa: F401  (re-exported: the environment a writer reads)

# ----------------------------------------------------------------------------- JSON with limits
# defined in partplan._files (below every layer: the topology's files are read the same way)
from .._files import (  # noqa: E402,F401
    MAX_INT_DIGITS,
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    _JsonLimit,
    _parse_constant,
    _parse_int,
    json_depth,
    load_json,
)


# ----------------------------------------------------------------------------- names and terminals
_MAX_NAME = 200
_BAD_NAME_CHARS = re.compile(r"[/\\\x00-\x1f\x7f-\x9f:]")


def plain_name_problem(name: str) -> str | None:
    """Why ``name`` (a string read from a file) cannot be used as a file name
    — None when it can. A plain name is 1..200 characters, holds no ``/``,
    ``\\``, ``:``, NUL or other control character, no bidi override or lone
    surrogate (not text: it cannot be encoded as a file name), does not start with ``.``
    or ``-`` (so it is never ``.``, ``..``, a hidden file or an option) and is
    not all blanks."""
    if not isinstance(name, str):
        return f"is not a string ({type(name).__name__})"
    if not name or not name.strip():
        return "is empty"
    if len(name) > _MAX_NAME:
        return f"is {len(name)} characters long (at most {_MAX_NAME})"
    if _BAD_NAME_CHARS.search(name) or _CONTROL.search(name):
        return ("holds a path separator, ':' or a control or bidi-override character (it must be a plain name, "
                "not a path)")
    if name[0] in ".-":
        return f"starts with {name[0]!r} (it must be a plain name, not a path or an option)"
    return None


def plain_name(name, default: str = "graph") -> str:
    """``name`` made a plain name (:func:`plain_name_problem` is None for the
    result) by the documented rule: each path separator, ``:`` and control
    character becomes ``_``, leading ``.`` / ``-`` are dropped, the rest is cut
    to 200 characters; nothing left gives ``default``. What a writer stores;
    a reader refuses a name that breaks the rule instead of repairing it."""
    s = _CONTROL.sub("_", _BAD_NAME_CHARS.sub("_", str(name)))[:_MAX_NAME].lstrip(".-")
    return s if s.strip() else default


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def printable(s: Any) -> str:
    """``str(s)`` with every control character (ANSI escapes, carriage
    returns, newlines, bidi overrides) and lone surrogate (an undecodable
    byte of a file name, which no terminal encoding can print) written as a
    backslash escape, so a string from a file or the command line printed to
    a terminal is shown, never obeyed (as ``ls`` and git show names)."""
    s = str(s)
    if not _CONTROL.search(s):
        return s
    return _CONTROL.sub(lambda mt: mt.group(0).encode("unicode_escape").decode("ascii"), s)


__all__ = ["load_json", "json_depth", "plain_name_problem", "plain_name", "printable", "source_date_epoch",
           "MAX_JSON_DEPTH", "MAX_INT_DIGITS"]
