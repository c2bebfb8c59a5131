"""What a run and a job both offer the report: ``Profile``.

A ``Run`` holds one event table; a ``Job`` (``perfkit_core.jobs``) holds what its ranks'
analyses returned, computed rank by rank on workers. The report, its headline and its header
read either through this protocol alone, so neither needs to know which it was given; the facts
that differ in how they are found (device work, steps) are asked of ``perfkit_core.events.facts``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import pandas as pd


class Profile(Protocol):
    """A profile a report can be made of: its metadata (``meta``: framework, ranks, steps,
    span, devices, sources), the framework that recorded it, its summary views and its advice."""

    meta: dict[str, Any]

    @property
    def framework(self) -> str: ...

    def summary(self, view: str, **options: Any) -> pd.DataFrame: ...

    def advise(self, *, rules: list[str] | None = None) -> list[Any]: ...
