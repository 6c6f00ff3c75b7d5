"""Memory of this process, for the per-stage reports (bytes).

Linux reads ``/proc/self/status`` (``VmHWM`` peak, ``VmRSS`` now); elsewhere
``ru_maxrss``. :func:`reset_peak` lets a stage report its own peak.
"""
from __future__ import annotations

import resource


def peak_rss_bytes() -> int:
    """Peak resident set size of this process in bytes (``VmHWM`` of
    /proc/self/status; ``ru_maxrss`` where there is no /proc)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def current_rss_bytes() -> int:
    """Resident set size of this process now, in bytes (``VmRSS``; 0 without /proc)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs).
    False where not allowed (then stage peaks are cumulative)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
