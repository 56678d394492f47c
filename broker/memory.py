"""Freed memory kept for reuse by the broker's processes (the broker and its pull processes).

A pull builds and frees megabyte buffers many times a second: a segment or rows read from
SQLite, the reply, gRPC's slices. With glibc's defaults each is fresh memory from the kernel,
whose page faults cost more than the rest of the reply: a block above the mmap threshold is
mapped and unmapped every time, and a freed heap top is given back. Measured (docs/benchmarks.md):
heap headroom alone made a 1,024-message reply from rows cost 0.35 ms instead of 1.9 ms; a pull
process serving segments spent 3.2-3.9 µs of CPU per message without these settings, 2.7-2.8
with the headroom alone and 1.3-1.65 with all three.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
TOP_PAD_BYTES = 16 * 1024 * 1024
# Blocks up to a pull's largest reply (PULL_BYTES) and more come from the heap and stay there;
# glibc refuses an mmap threshold above 32 MiB.
KEEP_BYTES = 32 * 1024 * 1024


def keep_freed_memory() -> None:
    """Keep 16 MiB of headroom when the heap grows, serve blocks up to 32 MiB from the heap, and
    give its top back only beyond 32 MiB free. Nothing to do where mallopt does not exist (musl,
    macOS)."""
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return
    for name, parameter, value in (
        ("M_TOP_PAD", M_TOP_PAD, TOP_PAD_BYTES),
        ("M_MMAP_THRESHOLD", M_MMAP_THRESHOLD, KEEP_BYTES),
        ("M_TRIM_THRESHOLD", M_TRIM_THRESHOLD, KEEP_BYTES),
    ):
        if mallopt(parameter, value) != 1:
            log.warning("mallopt(%s) was refused; large replies will cost more", name)
