"""Environment variables that libraries partplan imports read at import time,
checked without importing them (numpy, scipy, torch): what the CLI checks
before anything else, so that a malformed value is one error naming the
variable, never a traceback from numpy's f2py (``int(os.environ[...])`` at
import).
"""
from __future__ import annotations

import os
import re

from .errors import OptionError

SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"
MAX_EPOCH = 253402300799     # 9999-12-31T23:59:59Z: the last second an ISO 8601 year of 4 digits holds
_EPOCH = re.compile(r"[0-9]{1,12}")


def source_date_epoch() -> int | None:
    """``$SOURCE_DATE_EPOCH`` as seconds since 1970, None when unset. What it
    may hold: decimal digits only (no sign, blank, exponent or fraction), 0
    to :data:`MAX_EPOCH` (up to the end of the year 9999); anything else,
    the empty string included (numpy's f2py fails on it too), is one
    :class:`~partplan.errors.OptionError` naming the variable."""
    raw = os.environ.get(SOURCE_DATE_EPOCH)
    if raw is None:
        return None
    if not _EPOCH.fullmatch(raw) or int(raw) > MAX_EPOCH:
        raise OptionError(f"{SOURCE_DATE_EPOCH} = {raw[:40]!r}: not a time in seconds since 1970 (decimal "
                          f"digits, 0 to {MAX_EPOCH}: the year 9999 at most; unset it or give one)")
    return int(raw)


def check_environment() -> None:
    """Every variable of this module, checked (the CLI's first step)."""
    source_date_epoch()


__all__ = ["source_date_epoch", "check_environment", "SOURCE_DATE_EPOCH", "MAX_EPOCH"]
