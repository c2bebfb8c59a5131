"""What a ``Run`` or a ``Comparison`` shows in Jupyter: the key parts of its HTML report (the
headline, the advice and the main tables, with their charts) in an isolated frame, so the page's
style and script never touch the notebook's."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfkit_core.comparison import Comparison
    from perfkit_core.events.run import Run

#: Views a run shows in a notebook (every view stays a plain DataFrame: ``run.summary(name)``).
NOTEBOOK_VIEWS = ("model", "phases", "operator", "kernel")
#: Rows of the ranked tables (ops, kernels) shown in a notebook.
NOTEBOOK_TOP = 10
FRAME_HEIGHT_PX = 900


def _frame(page: str) -> str:
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" '
        f'style="width: 100%; height: {FRAME_HEIGHT_PX}px; border: 1px solid #ddd"></iframe>'
    )


def run_html(run: Run) -> str:
    """The notebook view of ``run``: its HTML report's headline, advice and main tables."""
    from perfkit_core.report import build_report, render

    return _frame(render(build_report(run, NOTEBOOK_VIEWS, top=NOTEBOOK_TOP), "html"))


def comparison_html(comparison: Comparison) -> str:
    """The notebook view of ``comparison``: its HTML comparison page."""
    from perfkit_core.report import build_comparison_report, render

    return _frame(render(build_comparison_report(comparison, top=NOTEBOOK_TOP), "html"))
