"""Where the files of a MindSpore profile are: which folders perfkit reads as one MindSpore run.

MindSpore 2.x writes one folder per profiled cycle, ``<host>_<pid>_<time>_ascend_ms/`` (on the
CPU and on Ascend alike), under the folder given to ``tensorboard_trace_handler`` or
``Profiler(output_path=...)``:

- ``ASCEND_PROFILER_OUTPUT/trace_view.json``: the timeline (a chrome trace; ``ts`` and ``dur``
  are strings, in microseconds); on Ascend also ``kernel_details.csv``, ``op_statistic.csv``
  and ``step_trace_time.csv``;
- ``FRAMEWORK/``: on the CPU, ``cpu_op_type_info_<dev>.csv`` (per type),
  ``cpu_op_detail_info_<dev>.csv`` (per full name), ``cpu_op_execute_timestamp_<dev>.txt``
  (every call) and ``cpu_framework_<dev>.txt`` (input shapes per call).

MindSpore's GPU profiler (1.x and 2.x before the Ascend-style output) writes one flat folder
(``<output_path>/profiler/``) of ``gpu_op_detail_info_<dev>.csv``, ``gpu_op_type_info_<dev>.csv``,
``gpu_activity_data_<dev>.csv``, ``gpu_op_execute_timestamp_<dev>.txt``,
``activity_execute_timestamp_<dev>.txt``, ``gpu_framework_<dev>.txt``,
``step_trace_profiling_<dev>.txt`` and ``start_time_<dev>.txt``, beside the host operators'
``cpu_*`` files.

perfkit also writes ``perfkit_spans.json`` into a profile's folder when it took the profile: the
steps and user spans it recorded on the host clock, which MindSpore does not record on the CPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from perfkit_core import TraceError

#: The folder MindSpore writes per profiled cycle.
ASCEND_MS_RE = re.compile(r"^(?P<worker>.+)_(?P<pid>\d+)_(?P<time>\d{14,20})_ascend_ms$")
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
FRAMEWORK_DIR = "FRAMEWORK"
TRACE_VIEW = "trace_view.json"
#: The file perfkit writes into a profile's folder (``perfkit_mindspore.spans``).
SPANS_FILE = "perfkit_spans.json"
_DEVICE_FILE_RE = re.compile(r"^(?P<stem>[a-z_]+?)_(?P<dev>\d+)\.(?P<ext>csv|txt|json)$")
#: Files of the GPU profiler's flat folder, by stem (the device id and extension follow).
GPU_STEMS = (
    "gpu_op_detail_info",
    "gpu_op_type_info",
    "gpu_activity_data",
    "gpu_op_execute_timestamp",
    "activity_execute_timestamp",
    "gpu_framework",
    "step_trace_profiling",
    "start_time",
    "cpu_op_execute_timestamp",
    "cpu_op_type_info",
    "cpu_op_detail_info",
    "cpu_framework",
)


@dataclass
class Layout:
    """The files of one MindSpore profile.

    ``kind``: ``ascend_ms`` (a ``*_ascend_ms`` folder: the CPU's output and Ascend's) or ``gpu``
    (the GPU profiler's flat folder); ``root``: that folder; ``files``: each file found, by its
    stem (``trace_view``, ``kernel_details``, ``cpu_op_type_info``, ...); ``device``: the device
    id in the file names; ``pid``: the training process's id when the folder name says it.
    """

    kind: str
    root: Path
    files: dict[str, Path] = field(default_factory=dict)
    device: int = 0
    pid: int | None = None

    def get(self, stem: str) -> Path | None:
        """The file of ``stem``, or None."""
        return self.files.get(stem)


def _device_files(
    folder: Path, stems: tuple[str, ...] | None = None
) -> tuple[dict[str, Path], int]:
    """The ``<stem>_<dev>.<ext>`` files of ``folder`` by stem, and the device id they share
    (the lowest when several are present)."""
    found: dict[str, dict[int, Path]] = {}
    try:
        entries = list(folder.iterdir())
    except OSError:
        return {}, 0
    for entry in entries:
        m = _DEVICE_FILE_RE.match(entry.name)
        if m and (stems is None or m["stem"] in stems) and entry.is_file():
            found.setdefault(m["stem"], {})[int(m["dev"])] = entry
    if not found:
        return {}, 0
    device = min(min(by_dev) for by_dev in found.values())
    return {stem: by_dev[device] for stem, by_dev in found.items() if device in by_dev}, device


def _ascend_ms(folder: Path) -> Layout:
    files: dict[str, Path] = {}
    output = folder / OUTPUT_DIR
    for name in (
        "trace_view.json",
        "kernel_details.csv",
        "op_statistic.csv",
        "step_trace_time.csv",
    ):
        candidate = output / name
        if candidate.is_file():
            files[name.split(".")[0]] = candidate
    framework, device = _device_files(folder / FRAMEWORK_DIR)
    files.update(framework)
    spans = folder / SPANS_FILE
    if spans.is_file():
        files["perfkit_spans"] = spans
    m = ASCEND_MS_RE.match(folder.name)
    return Layout("ascend_ms", folder, files, device, int(m["pid"]) if m else None)


def _is_ascend_ms(folder: Path) -> bool:
    return (folder / OUTPUT_DIR).is_dir() or (
        ASCEND_MS_RE.match(folder.name) is not None and (folder / FRAMEWORK_DIR).is_dir()
    )


def _is_gpu(folder: Path) -> bool:
    files, _ = _device_files(folder, ("gpu_op_execute_timestamp", "gpu_op_detail_info"))
    return bool(files)


def find_layout(path: Path) -> Layout | None:
    """The MindSpore profile at ``path``: a ``*_ascend_ms`` folder, a folder holding exactly one
    (what ``tensorboard_trace_handler(dir)`` writes into ``dir``), or the GPU profiler's folder
    (or its parent, ``Profiler(output_path=...)``'s folder, holding ``profiler/``). None when
    ``path`` is none of these. Lists folders only: reads no file.

    Raises ``TraceError`` for a folder holding several profiles (one per profiled cycle): each
    is read on its own.
    """
    if not path.is_dir():
        return None
    if _is_ascend_ms(path):
        return _ascend_ms(path)
    if _is_gpu(path):
        files, device = _device_files(path, GPU_STEMS)
        spans = path / SPANS_FILE
        if spans.is_file():
            files["perfkit_spans"] = spans
        return Layout("gpu", path, files, device)
    try:
        children = sorted(p for p in path.iterdir() if p.is_dir())
    except OSError:
        return None
    profiles = [c for c in children if ASCEND_MS_RE.match(c.name) and _is_ascend_ms(c)]
    if len(profiles) > 1:
        names = ", ".join(p.name for p in profiles[:3]) + (", ..." if len(profiles) > 3 else "")
        raise TraceError(
            path,
            f"holds {len(profiles)} MindSpore profiles ({names}), one per profiled cycle: "
            "give perfkit one of them",
        )
    if profiles:
        return _ascend_ms(profiles[0])
    gpu = path / "profiler"
    if gpu.is_dir() and _is_gpu(gpu):
        return find_layout(gpu)
    return None


def is_trace_view(path: Path, head: bytes) -> bool:
    """Whether ``path`` is MindSpore's ``trace_view.json`` (by its name and first bytes)."""
    return (
        path.name == TRACE_VIEW
        and b'"process_name"' in head
        and (
            b'"CPU OP"' in head
            or b'"MindSpore"' in head
            or b'"Ascend Hardware"' in head
            or b'"HostCpuOps"' in head
            or b'"Scope Layer"' in head
        )
    )
