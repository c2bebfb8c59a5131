"""Giving freed memory back to the system between the large steps of an analysis.

A view's temporaries (arrays of every event, Arrow buffers) are freed when it returns, but
glibc's allocator keeps the pages they used for later allocations, and so does Arrow's memory
pool: the process's resident memory stays at its highest point, and the next view's tables are
laid over freed pages that still count. On the 219 MB Kineto trace of ``bench/bench_report.py``
about 50 MB were held that way between two views; handing them back after each view took the
report's peak from 371 to about 362 MB, at no measurable cost in time.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS, Windows)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return getattr(ctypes.CDLL(name), "malloc_trim", None)
    except OSError:
        return None


def give_back_freed_memory() -> None:
    """Return the memory already freed to the system: Arrow's pool's unused memory and glibc's
    free pages (``malloc_trim``). Nothing is collected or freed here: what is still referenced
    stays. Does nothing where neither applies."""
    try:
        import pyarrow

        pyarrow.default_memory_pool().release_unused()
    except ImportError:  # pragma: no cover - pandas' strings without Arrow
        pass
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
