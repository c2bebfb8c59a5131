"""Golden reports: the whole JSON report of a few real traces, kept in tests/data/report_golden.

``tests/test_report_golden.py`` checks that today's code gives each trace's report JSON
exactly (every figure to the last bit): every registered view whole (no ``top`` cut), the
advice, the headline, and the views again with their other groupings. A change that makes
the analysis faster or shares its intermediate results must leave every figure as it was;
a change meant to alter figures regenerates the files, from the repository root:

    python -m tests.report_golden            # every trace found
    python -m tests.report_golden a100       # only some

and the diff of the golden files shows what changed. The traces: the V100 and A100 traces of
../shared/traces (left out when absent) and the real torch CPU run of tests/data/torch_cpu.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "data" / "report_golden"
#: Golden name -> the trace: a key of conftest's shared traces, or a path under the repository.
TRACES: dict[str, str] = {
    "v100_rank1": "v100_rank1",
    "resnet_nw0": "resnet_nw0",
    "a100_rank3": "a100_rank3",
    "torch_cpu": "tests/data/torch_cpu/mlp_adam_cpu.pt.trace.json.gz",
}
#: Views shown again with other options (one report per entry, advice left out).
VARIANTS: tuple[dict[str, dict[str, Any]], ...] = (
    {
        "roofline": {"by": "family"},
        "memory": {"by": "device"},
        "overview": {"by": "category"},
        "collectives": {"by": "rank"},
        "breakdown": {"per_step": True},
        "operator": {"group_by_input_shape": True},
    },
    {"roofline": {"by": "layer"}, "operator": {"op_detail": True}},
    {"roofline": {"by": "shape"}},
)


def trace_path(name: str) -> Path | None:
    """The trace of golden ``name``, None when it is not on this machine."""
    from conftest import ALL_TRACES
    from conftest import TRACES as SHARED

    key = TRACES[name]
    path = SHARED / ALL_TRACES[key] if key in ALL_TRACES else ROOT / key
    return path if path.is_file() else None


def golden_path(name: str) -> Path:
    """Where golden ``name`` is kept."""
    return GOLDEN / f"{name}.json.gz"


def report_payload(path: Path) -> dict[str, Any]:
    """The JSON of ``path``'s reports as plain data: ``report`` (every registered view whole,
    advice, headline, header) and ``variants`` (the views of ``VARIANTS``), each from a freshly
    loaded run; the trace's folder left out of the text, so the payload is the same wherever the
    trace lies."""
    import perfkit_core
    from perfkit_core.report.json import dumps, report_json
    from perfkit_core.report.model import build_report
    from perfkit_core.views.registry import registered_views

    views = list(registered_views())
    reports = [report_json(build_report(perfkit_core.load(path), views, top=None))]
    for options in VARIANTS:
        run = perfkit_core.load(path)
        reports.append(
            report_json(build_report(run, list(options), top=None, options=options, advice=False))
        )
    text = dumps({"report": reports[0], "variants": reports[1:]})
    text = text.replace(json.dumps(str(path.parent))[1:-1], "TRACES")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def read_golden(name: str) -> dict[str, Any]:
    """The golden payload of ``name``."""
    with gzip.open(golden_path(name), "rt") as f:
        loaded: dict[str, Any] = json.load(f)
    return loaded


def write_golden(name: str, payload: dict[str, Any]) -> Path:
    """Write golden ``name`` (gzip of indented JSON, no timestamp, so equal payloads give equal
    files); return its path."""
    path = golden_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, indent=1, sort_keys=True) + "\n"
    with gzip.GzipFile(path, "wb", 9, mtime=0) as f:
        f.write(text.encode())
    return path


def main(argv: list[str]) -> int:
    names = argv or list(TRACES)
    for name in names:
        path = trace_path(name)
        if path is None:
            print(f"{name}: trace not found, left as it was")
            continue
        print(f"{name}: wrote {write_golden(name, report_payload(path))}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
