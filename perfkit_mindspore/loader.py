"""``load_folder``: any MindSpore profile folder (CPU, GPU, Ascend) as a perfkit run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfkit_core import TraceError
from perfkit_mindspore.gpu import load_gpu_profile
from perfkit_mindspore.layout import Layout, find_layout
from perfkit_mindspore.profile import load_profile


def load_folder(path: str | Path) -> Any:
    """The run of the MindSpore profile at ``path`` (a ``*_ascend_ms`` folder, the folder
    ``tensorboard_trace_handler`` wrote it into, or the GPU profiler's folder); ``TraceError``
    naming the file for bad input."""
    path = Path(path)
    layout = find_layout(path)
    if layout is None:
        raise TraceError(path, "not a MindSpore profiler folder")
    if layout.kind == "gpu":
        return load_gpu_profile(layout)
    return load_profile(layout)


def load_trace_view(path: str | Path) -> Any:
    """The run of a MindSpore ``trace_view.json``: of its whole profile folder when it sits in
    one (``<profile>/ASCEND_PROFILER_OUTPUT/``), else of the timeline alone."""
    path = Path(path)
    parent = path.parent
    if parent.name == "ASCEND_PROFILER_OUTPUT":
        layout = find_layout(parent.parent)
        if layout is not None and layout.get("trace_view") == path:
            return load_profile(layout)
    return load_profile(Layout("ascend_ms", parent, {"trace_view": path}))
