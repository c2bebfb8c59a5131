"""A report's figures do not move when its analysis is reorganised: the whole JSON report of the
V100 and A100 traces and of a real torch CPU run (every view whole, the views' other
groupings, advice and headline) equals the golden file made before (tests/report_golden.py
says how to regenerate one after a deliberate change of figures)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.report_golden import TRACES, golden_path, read_golden, report_payload, trace_path


def _differences(got: Any, want: Any, where: str = "") -> list[str]:
    """Where ``got`` differs from ``want``: JSON paths, the first few."""
    if isinstance(want, dict) and isinstance(got, dict):
        out = [f"{where}/{k}: missing" for k in want if k not in got]
        out += [f"{where}/{k}: not in the golden file" for k in got if k not in want]
        for key in want:
            if key in got:
                out += _differences(got[key], want[key], f"{where}/{key}")
        return out
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{where}: {len(got)} items, golden {len(want)}"]
        out = []
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            out += _differences(g, w, f"{where}[{i}]")
        return out
    return [] if got == want and type(got) is type(want) else [f"{where}: {got!r} != {want!r}"]


@pytest.mark.parametrize("name", list(TRACES))
def test_report_json_equals_golden(name: str) -> None:
    path = trace_path(name)
    if path is None:
        pytest.skip(f"trace of {name} not found")
    if not golden_path(name).is_file():
        pytest.fail(f"no golden file for {name}: run python -m tests.report_golden {name}")
    got = report_payload(path)
    differences = _differences(got, read_golden(name))
    assert not differences, "\n".join(differences[:20])
