"""``headline_text(run)``: perfkit's headline of a run as text, as ``perfkit report`` opens with
it: what a trainer's integration prints when training ends."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfkit_core.events.run import Run


def headline_text(run: Run, *, time_unit: str = "ms", batch_size: int | None = None) -> str:
    """The headline of ``run``'s report as text (step time, throughput, where the step goes, the
    change to make first), times in ``time_unit``, throughput in samples/s with ``batch_size``;
    empty when the run has no headline."""
    from perfkit_core.report.headline import HEADLINE_VIEWS
    from perfkit_core.report.model import build_report
    from perfkit_core.report.text import render_headline

    report = build_report(
        run, HEADLINE_VIEWS, time_unit=time_unit, charts=False, batch_size=batch_size
    )
    if report.headline is None:
        return ""
    return render_headline(report.headline, report.time_unit)
