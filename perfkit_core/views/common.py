"""What the views share: the device-side kinds, the no-steps note and the frame builder.

Conventions of every view: the key column is ``name``; times are ns (``*_ns``), shares are
percent (``*_pct``); a figure that was not measured (no device events, no memory events) is
NaN, never a zero that looks measured; ``frame.attrs["note"]`` says what a reader must know.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: Kinds of device events that keep a device busy.
DEVICE_KINDS = ("kernel", "communication", "memcpy", "memset")
#: Kinds of device events that are kernels (compute and communication).
KERNEL_KINDS = ("kernel", "communication")

#: Kinds that are not work a thread or device did: step spans (they hold the work), memory
#: instants, and the profiler's own spans and markers.
NOT_WORK_KINDS = ("step", "memory", "profiler")

NO_STEPS_NOTE = "no steps were recorded: the whole profiled span counts as one step"


def no_step_note(has_steps: bool) -> str | None:
    """The note a view carries when the run recorded no steps (None when it did)."""
    return None if has_steps else NO_STEPS_NOTE


def view_frame(
    rows: list[dict[str, Any]], columns: list[str], note: str | None = None
) -> pd.DataFrame:
    """Return a DataFrame of ``rows`` with ``columns`` in order, and ``note`` in its attrs."""
    import pandas as pd

    out = pd.DataFrame(rows, columns=columns)
    if note:
        out.attrs["note"] = note
    return out
