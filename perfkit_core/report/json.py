"""The JSON renderer: a report model as plain JSON-ready data (raw values: times in ns,
percentages, counts), and the helpers that turn numpy and pandas values into JSON values."""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any

from perfkit_core.events.schema import SCHEMA_VERSION
from perfkit_core.report.finding_summary import finding_json
from perfkit_core.views.contract import VIEWS_SCHEMA_VERSION

if TYPE_CHECKING:
    from perfkit_core.report.comparison_model import ComparisonReport
    from perfkit_core.report.model import Report, Table


def jsonable(value: Any) -> Any:
    """A plain JSON value: numpy scalars unwrapped, NaN as None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if hasattr(value, "item"):
        return jsonable(value.item())
    return value


def frame_records(frame: Any) -> list[dict[str, Any]]:
    """Rows of a DataFrame as JSON-ready dicts (NaN becomes null)."""
    return [{k: jsonable(v) for k, v in row.items()} for row in frame.to_dict(orient="records")]


def _default(value: Any) -> Any:
    if hasattr(value, "item"):
        return jsonable(value.item())
    return str(value)


def dumps(payload: Any) -> str:
    """``payload`` as indented JSON text (numpy values unwrapped, anything else as a string)."""
    return json.dumps(payload, indent=1, default=_default) + "\n"


def table_json(table: Table) -> dict[str, Any]:
    """A table: title, note, columns (key, label, unit) and rows as records."""
    return {
        "title": table.title,
        "note": table.note,
        "columns": [
            {
                "key": c.key,
                "label": c.label,
                "unit": c.unit,
                **({"repeats_name": True} if c.repeats_name else {}),
            }
            for c in table.columns
        ],
        "rows": table.records(),
        **({"levels": table.levels} if table.levels else {}),
        **({"row_units": table.row_units} if table.row_units else {}),
    }


def schema_versions() -> dict[str, str]:
    """The versions of what a JSON report holds: ``events``, the event table's schema
    (``events.schema.SCHEMA_VERSION``), and ``views``, the views' columns
    (``views.contract.VIEWS_SCHEMA_VERSION``)."""
    return {"events": SCHEMA_VERSION, "views": VIEWS_SCHEMA_VERSION}


def report_json(report: Report) -> dict[str, Any]:
    """A run's report: the schema versions it is written in (``schema_versions``), header,
    advice findings (raw evidence), tables by id, charts, metadata."""
    return {
        "schema_version": schema_versions(),
        "title": report.title,
        "time_unit": report.time_unit,
        "header": [{"label": h.label, "value": h.value, "unit": h.unit} for h in report.header],
        "headline": None
        if report.headline is None
        else {
            "items": [
                {"label": h.label, "value": h.value, "unit": h.unit} for h in report.headline.items
            ],
            "phases": [p.__dict__ for p in report.headline.phases],
            "finding": report.headline.finding.id if report.headline.finding else None,
            "combined": None
            if report.headline.combined is None
            else report.headline.combined.__dict__,
            "note": report.headline.note,
        },
        "advice": [finding_json(f, report.time_unit) for f in report.findings or []],
        "advice_note": report.advice_note,
        "tables": {t.id: table_json(t) for t in report.tables},
        "charts": [chart.__dict__ for chart in report.charts],
        "meta": report.meta,
    }


def comparison_json(report: ComparisonReport) -> dict[str, Any]:
    """A comparison: the verdict (numbers and its sentences), the runs, tables by id, charts,
    and the gate when one was asked for."""
    payload: dict[str, Any] = {
        "schema_version": schema_versions(),
        "title": report.title,
        "time_unit": report.time_unit,
        "per": report.per,
        "labels": report.labels,
        "frameworks": report.frameworks,
        "tables": {t.id: table_json(t) for t in report.tables},
        "charts": [chart.__dict__ for chart in report.charts],
    }
    if report.verdict is not None:
        payload["verdict"] = {**report.verdict.to_dict(), "lines": list(report.verdict_lines)}
    if report.gate is not None:
        payload["gate"] = report.gate.to_dict()
    return payload
