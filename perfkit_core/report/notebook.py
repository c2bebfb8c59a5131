"""What a ``Run`` or a ``Comparison`` shows in Jupyter: the key parts of its HTML report (the
headline, the advice and the main tables) inline in the notebook, as tall as its content.

The HTML is a fragment of the report page (``html.render_report_html(..., fragment=True)``):
one ``div.perfkit-nb`` element holding the content and a style whose every rule is scoped to
that element, and no script, so nothing of it reaches the rest of the notebook. The charts and
the sortable, searchable tables are in the full report (``perfkit report --format html``).

Run and Comparison know nothing of this layer: ``perfkit_core``, imported inside IPython, gives
IPython an HTML formatter for each that calls ``notebook_html`` (``perfkit_core.
load_ipython_extension``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfkit_core.comparison import Comparison
    from perfkit_core.events.run import Run

#: Views a run shows in a notebook (every view stays a plain DataFrame: ``run.summary(name)``).
NOTEBOOK_VIEWS = ("model", "phases", "operator", "kernel")
#: Rows of the ranked tables (ops, kernels) shown in a notebook.
NOTEBOOK_TOP = 10


def run_html(run: Run) -> str:
    """The notebook view of ``run``: its report's headline, advice and main tables, as an HTML
    fragment (see the module's docstring)."""
    from perfkit_core.report.html import render_report_html
    from perfkit_core.report.model import build_report

    return render_report_html(build_report(run, NOTEBOOK_VIEWS, top=NOTEBOOK_TOP), fragment=True)


def comparison_html(comparison: Comparison) -> str:
    """The notebook view of ``comparison``: its comparison report's verdict and tables, as an
    HTML fragment."""
    from perfkit_core.report.comparison_model import build_comparison_report
    from perfkit_core.report.html import render_comparison_html

    return render_comparison_html(
        build_comparison_report(comparison, top=NOTEBOOK_TOP), fragment=True
    )


def notebook_html(value: Run | Comparison) -> str:
    """The notebook view of a run (``run_html``) or a comparison (``comparison_html``)."""
    from perfkit_core.comparison import Comparison

    if isinstance(value, Comparison):
        return comparison_html(value)
    return run_html(value)
