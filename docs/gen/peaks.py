"""The device peaks the roofline measures ops against (``perfkit_core.views.costmodel.peaks``), each with
its source, and the op kinds of the performance model."""

from __future__ import annotations

from gen import generator
from gen.markdown import DocsError, code, codes, table
from perfkit_core.views.costmodel.opcost import KINDS, MODEL_KINDS
from perfkit_core.views.costmodel.peaks import DEVICE_PEAKS, PRECISIONS, lookup_device


@generator("peaks.devices")
def devices() -> str:
    """One row per device of ``DEVICE_PEAKS``: its peaks, how it is recognised, its source;
    each entry checked to be the one a device of its own name finds."""
    rows = []
    for entry in DEVICE_PEAKS:
        if not entry.source.startswith("https://"):
            raise DocsError(f"{entry.name} has no datasheet address")
        low, high = entry.memory_gib
        memory = ((low + high) / 2 if high < 1e8 else low + 1) * 2**30
        if lookup_device(entry.name, entry.compute_capability, memory) is not entry:
            raise DocsError(f"a device named {entry.name!r} does not find its own entry")
        figures = [f"{entry.tflops[p]:g}" if entry.tflops.get(p) else "-" for p in PRECISIONS]
        rows.append(
            [
                entry.name,
                *figures,
                f"{entry.bandwidth_tbps:g}",
                code(entry.pattern)
                + (f", cc {entry.compute_capability}" if entry.compute_capability else ""),
                f"[datasheet]({entry.source})",
            ]
        )
    return table(["device", *PRECISIONS, "TB/s", "recognised by", "source"], rows)


@generator("peaks.kinds")
def kinds() -> str:
    """The op kinds of the model, and those whose FLOPs are model FLOPs."""
    if not set(MODEL_KINDS) <= set(KINDS):
        raise DocsError("MODEL_KINDS names a kind KINDS lacks")
    return f"{codes(KINDS)} (model FLOPs: {codes(MODEL_KINDS)})"
