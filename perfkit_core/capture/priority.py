"""The lowest CPU priority for the conversion helper: set by the program as it starts the
helper, and again by the helper itself."""

from __future__ import annotations

import contextlib
import os


def lower_priority(pid: int = 0) -> list[str]:
    """Give the process ``pid`` (0: this one) the lowest CPU priority the system grants; return
    what was set.

    nice 19 (which also puts its disk requests last among normal ones), then on Linux the
    ``SCHED_IDLE`` policy: it runs only on a core nothing else wants. Settings the system
    refuses are skipped.
    """
    done = []
    with contextlib.suppress(OSError, AttributeError):
        os.setpriority(os.PRIO_PROCESS, pid, 19)
        done.append("nice 19")
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
        done.append("SCHED_IDLE")
    return done
