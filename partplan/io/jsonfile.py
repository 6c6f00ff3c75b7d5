"""Bounded reading of a JSON file: what every JSON reader of a file uses.

:func:`read_json` opens the file without blocking (a FIFO, a directory or a
device is refused on the open descriptor before any byte is read), compares
its size with the caller's limit and with the memory budget before reading,
reads at most that many bytes (a file that grows meanwhile is refused too),
decodes UTF-8 strictly and parses with :func:`partplan.io.trust.load_json`'s
limits (nesting depth, integer length, no NaN / Infinity). Every problem is
one exception of the caller's type, naming the file (escaped) and what it was
read as. Defined in :mod:`partplan._files` (below every layer, so that the
topology's machine description reads its files the same way).
"""
from __future__ import annotations

from .._files import parse_json_bytes, read_json, read_json_bytes

__all__ = ["parse_json_bytes", "read_json", "read_json_bytes"]
