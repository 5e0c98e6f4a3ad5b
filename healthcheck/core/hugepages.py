"""Transparent huge pages off for this process (Linux ``prctl(PR_SET_THP_DISABLE)``), for the commands that
allocate and free hundreds of megabytes in a few seconds and exit (the readiness report).

Where the kernel backs anonymous memory with 2 MB pages (``transparent_hugepage=always``, or NumPy's own
``madvise`` of its large arrays), each first touch of a region zeroes 2 MB at once, and memory freed and
taken again is zeroed again: at 10,000 nodes the report's process spent 0.8 s of its CPU zeroing pages
(``perf``), its system time 1.3-1.8 s. With 4 kB pages: system time 1.2-1.3 s, peak RSS 0.1 GB lower and the
whole report 0.3 s faster on two cores (docs/performance.md). Only this process and its children; the
setting other processes see is unchanged. Never an error: where the call does not exist (not Linux, a
kernel before 3.15) nothing changes.
"""
from __future__ import annotations

import sys

PR_SET_THP_DISABLE = 41  # <linux/prctl.h>


def disable_thp() -> bool:
    """Turn transparent huge pages off for this process; whether the kernel took it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
        prctl.restype = ctypes.c_int
        return prctl(PR_SET_THP_DISABLE, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                     ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):  # no libc to load, no prctl in it
        return False
