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

import numpy as np

from .._env import source_date_epoch  # noqa: F401  (re-exported: the environment a writer reads)
from ..errors import PlanError

# ----------------------------------------------------------------------------- JSON with limits
MAX_JSON_DEPTH = 64          # nesting of objects / arrays; a plan manifest needs 5
MAX_INT_DIGITS = 20          # int64 has at most 19 digits (+ sign)
MAX_JSON_BYTES = 1 << 30     # 1 GiB: a manifest listing 10^4 ranks' pairs is far below it

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def json_depth(raw: bytes) -> int:
    """Deepest nesting of ``[``/``{`` in JSON text ``raw`` (strings ignored;
    vectorized: one regex pass, one cumulative sum)."""
    body = _STRING.sub(b'""', raw)
    a = np.frombuffer(body, dtype=np.uint8)
    step = (a == ord("[")).astype(np.int32) + (a == ord("{")) - (a == ord("]")) - (a == ord("}"))
    return int(np.cumsum(step).max()) if step.size else 0


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _JsonLimit(f"an integer of {len(text.lstrip('-'))} digits (at most {MAX_INT_DIGITS})")
    return int(text)


def _parse_constant(name: str):
    raise _JsonLimit(f"{name} is not a JSON number")


class _JsonLimit(ValueError):
    pass


def load_json(raw: bytes | str, where: str) -> Any:
    """Parse JSON text from a file with limits: at most :data:`MAX_JSON_BYTES`
    bytes, :data:`MAX_JSON_DEPTH` levels of nesting, integers of at most
    :data:`MAX_INT_DIGITS` digits, no NaN / Infinity. ``where`` (the file)
    starts the one :class:`PlanError` raised otherwise."""
    import json
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if len(raw) > MAX_JSON_BYTES:
        raise PlanError(f"{where}: {len(raw)} bytes of JSON, more than a plan needs ({MAX_JSON_BYTES})")
    depth = json_depth(raw)
    if depth > MAX_JSON_DEPTH:
        raise PlanError(f"{where}: JSON nested {depth} levels deep (at most {MAX_JSON_DEPTH})")
    try:
        return json.loads(raw, parse_int=_parse_int, parse_constant=_parse_constant)
    except _JsonLimit as exc:
        raise PlanError(f"{where}: not a plan's JSON: {exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError) as exc:
        raise PlanError(f"{where}: not valid JSON ({printable(str(exc))})") from None


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
