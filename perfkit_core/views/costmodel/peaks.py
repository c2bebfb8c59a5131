"""What a device can do at best: its peak FLOP rate per precision and its memory bandwidth, the
ceilings of the roofline.

GPUs are looked up in ``DEVICE_PEAKS`` (vendors' datasheet figures, dense, no sparsity) by the
device name and compute capability the trace recorded (``Run.meta["devices"]``). CPUs and
unknown devices get peaks measured on this machine by a short micro-benchmark (``perfkit
peaks``, ``measure_peaks``: a large float32 and float64 matrix product and a large copy with
numpy, best of several runs), kept in the user's cache folder, or peaks the user gives
(``--peak-tflops``, ``--peak-bandwidth``).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from perfkit_core.events.facts import has_device

if TYPE_CHECKING:
    from perfkit_core.events.run import Run

#: The precisions a ceiling is given for: vector units (``fp32``, ``fp64``) and tensor (or
#: AMD matrix) cores. fp32 math on tensor cores is TF32 on NVIDIA GPUs and FP32 matrix (MFMA)
#: on AMD's, which ``tf32 tensor`` stands for there. fp16/bf16 math off tensor cores is held
#: to the ``fp32`` ceiling.
PRECISIONS = ("fp64", "fp32", "tf32 tensor", "fp16 tensor", "bf16 tensor", "fp8 tensor")


@dataclass(frozen=True)
class DevicePeaks:
    """One device's datasheet peaks: ``tflops`` (TFLOP/s, dense) per precision of
    ``PRECISIONS``, ``bandwidth_tbps`` (TB/s of device memory), the ``source`` (the vendor's
    datasheet), and how a trace's device is recognised: ``pattern`` (a regular expression on
    the device name), ``compute_capability`` (when the trace records one, it must agree) and
    ``memory_gib`` (a range of total memory, for models sold in two sizes)."""

    name: str
    pattern: str
    tflops: dict[str, float]
    bandwidth_tbps: float
    source: str
    compute_capability: str | None = None
    memory_gib: tuple[float, float] = (0.0, 1e9)


_V100 = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"
_T4 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/tesla-t4/t4-tensor-core-datasheet-951643.pdf"
_A10 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a10/pdf/a10-datasheet.pdf"
_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_L4 = "https://resources.nvidia.com/en-us-data-center-overview/l4-gpu-datasheet"
_L40S = "https://resources.nvidia.com/en-us-l40s/l40s-datasheet-28413"
_H100 = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
_H200 = "https://nvdam.widen.net/s/nb5zzzsjdf/hpc-datasheet-sc23-h200-datasheet-3002446"
_MI250X = "https://www.amd.com/en/products/accelerators/instinct/mi200/mi250x.html"
_MI300X = "https://www.amd.com/content/dam/amd/en/documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf"


def _tc(
    fp64: float, fp32: float, tf32: float | None, half: float, fp8: float | None = None
) -> dict[str, float]:
    out = {"fp32": fp32, "fp16 tensor": half, "bf16 tensor": half}
    if fp64:
        out["fp64"] = fp64
    if tf32 is not None:
        out["tf32 tensor"] = tf32
    if fp8 is not None:
        out["fp8 tensor"] = fp8
    return out


#: Datasheet peaks of the GPUs users train on, in lookup order (more specific names first; the
#: first entry whose name pattern, compute capability and memory size fit is taken).
#: Tensor figures are dense (the datasheets' "with sparsity" figures halved). V100 and T4
#: have no bf16 or TF32 tensor cores; their fp16 tensor figure is given for bf16 too only as a
#: ceiling no bf16 op reaches on them (bf16 runs on their CUDA cores).
DEVICE_PEAKS: tuple[DevicePeaks, ...] = (
    DevicePeaks("NVIDIA V100S PCIe", r"V100S", {"fp64": 8.2, "fp32": 16.4, "fp16 tensor": 130.0}, 1.134, _V100, "7.0"),
    DevicePeaks("NVIDIA V100 PCIe", r"V100.*PCIE", {"fp64": 7.0, "fp32": 14.0, "fp16 tensor": 112.0}, 0.9, _V100, "7.0"),
    DevicePeaks("NVIDIA V100 SXM2", r"V100", {"fp64": 7.8, "fp32": 15.7, "fp16 tensor": 125.0}, 0.9, _V100, "7.0"),
    DevicePeaks("NVIDIA T4", r"\bT4\b", {"fp32": 8.1, "fp16 tensor": 65.0}, 0.32, _T4, "7.5"),
    DevicePeaks("NVIDIA A10", r"\bA10\b", _tc(0.0, 31.2, 62.5, 125.0), 0.6, _A10, "8.6"),
    DevicePeaks("NVIDIA A100 40GB", r"A100", _tc(9.7, 19.5, 156.0, 312.0), 1.555, _A100, "8.0", (0.0, 60.0)),
    DevicePeaks("NVIDIA A100 80GB PCIe", r"A100.*PCIE", _tc(9.7, 19.5, 156.0, 312.0), 1.935, _A100, "8.0", (60.0, 1e9)),
    DevicePeaks("NVIDIA A100 80GB SXM", r"A100", _tc(9.7, 19.5, 156.0, 312.0), 2.039, _A100, "8.0", (60.0, 1e9)),
    DevicePeaks("NVIDIA L40S", r"L40S", _tc(0.0, 91.6, 183.0, 362.05, 733.0), 0.864, _L40S, "8.9"),
    DevicePeaks("NVIDIA L4", r"\bL4\b", _tc(0.0, 30.3, 60.0, 121.0, 242.5), 0.3, _L4, "8.9"),
    DevicePeaks("NVIDIA H200 SXM", r"H200", _tc(34.0, 67.0, 494.5, 989.5, 1979.0), 4.8, _H200, "9.0"),
    DevicePeaks("NVIDIA H100 PCIe", r"H100.*PCIE", _tc(26.0, 51.0, 378.0, 756.0, 1513.0), 2.0, _H100, "9.0"),
    DevicePeaks("NVIDIA H100 SXM", r"H100", _tc(34.0, 67.0, 494.5, 989.5, 1979.0), 3.35, _H100, "9.0"),
    DevicePeaks("AMD Instinct MI300X", r"MI300X", _tc(81.7, 163.4, 163.4, 1307.4, 2614.9), 5.3, _MI300X),
    DevicePeaks("AMD Instinct MI250X", r"MI250X?", _tc(47.9, 47.9, 95.7, 383.0), 3.2768, _MI250X),
)  # fmt: skip
#: AMD's peak for fp32 math on matrix cores is FP32 matrix, not TF32 (MI300X's TF32 is 653.7).
AMD_TF32_NOTE = "on AMD GPUs, fp32 on matrix cores is held to the FP32 matrix peak"


@dataclass
class Peaks:
    """The ceilings a run's ops are measured against: ``tflops`` (TFLOP/s per precision),
    ``bandwidth_tbps`` (TB/s), the ``device`` they are of, and where they come from
    (``source``: a datasheet's address, ``measured on this machine ...``, or ``given``)."""

    device: str
    tflops: dict[str, float]
    bandwidth_tbps: float
    source: str
    notes: list[str] = field(default_factory=list)

    def ceiling(self, precision: str) -> float:
        """The peak TFLOP/s of ``precision`` (``fp32``, ``bf16 tensor``, ...), NaN when the
        device has none: tensor precisions the device lacks fall back to ``fp32``, and
        non-tensor fp16/bf16/fp8 math uses ``fp32``."""
        if precision in self.tflops:
            return self.tflops[precision]
        if precision == "fp64" and "fp64" not in self.tflops:
            return self.tflops.get("fp32", float("nan"))
        return self.tflops.get("fp32", float("nan"))


def lookup_device(
    name: str, compute_capability: str | None = None, memory_bytes: float | None = None
) -> DevicePeaks | None:
    """The ``DEVICE_PEAKS`` entry of a device named ``name`` (as a trace records it: ``Tesla
    V100-DGXS-32GB``, ``NVIDIA A100-SXM4-40GB``, ``AMD Instinct MI300X``), or None. A recorded
    compute capability must agree with the entry's, and total memory picks the 40 or 80 GB
    model."""
    gib = (memory_bytes or 0) / 2**30
    for entry in DEVICE_PEAKS:
        if not re.search(entry.pattern, name, re.IGNORECASE):
            continue
        if (
            compute_capability
            and entry.compute_capability
            and compute_capability != entry.compute_capability
        ):
            continue
        low, high = entry.memory_gib
        if memory_bytes and not low <= gib < high:
            continue
        return entry
    return None


# ------------------------------------------------------------------ measured peaks (CPUs)


def cache_path() -> Path:
    """Where measured peaks are kept: ``$PERFKIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/perfkit``,
    else ``~/.cache/perfkit`` (``peaks.json`` in it)."""
    base = os.environ.get("PERFKIT_CACHE_DIR")
    if base:
        return Path(base) / "peaks.json"
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(xdg) if xdg else Path.home() / ".cache"
    return root / "perfkit" / "peaks.json"


def cpu_name() -> str:
    """This machine's CPU model (``/proc/cpuinfo``'s model name where there is one)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


#: Sizes of the square matrices the micro-benchmark multiplies (small enough to stay in cache,
#: where a CPU reaches its peak FLOP rate) and of the array it copies (beyond any cache).
MATRIX_SIZES = (256, 512, 1024)
COPY_BYTES = 128 * 2**20


def _best_rate(work: Callable[[], object], amount: float, until: float) -> float:
    """The best ``amount`` per second of CPU time (all of the process's threads) of calls of
    ``work`` until ``time.perf_counter()`` reaches ``until`` (at least three calls): CPU time
    counts only while the work runs, so other work on a shared machine does not lower it."""
    best, calls = 0.0, 0
    while calls < 3 or time.perf_counter() < until:
        t0 = time.process_time()
        work()
        dt = time.process_time() - t0
        if dt > 0:
            best = max(best, amount / dt)
        calls += 1
    return best


def measure_peaks(seconds: float = 2.0) -> dict[str, Any]:
    """Measure this machine's CPU peaks with numpy in about ``seconds``: float32 and float64
    rates of square matrix products (``MATRIX_SIZES``; ``2*n**3`` FLOPs each), in TFLOP/s, and
    the bandwidth of copying a ``COPY_BYTES`` array split over one thread per core (its bytes
    read plus written), in TB/s. Each is the best of repeated runs, per second of CPU time the
    run used, times the cores: the whole machine's rate, which other work on a shared machine
    does not lower. Returns the cache record (``host``, ``cpu``, ``cores``, ``measured_at``,
    ``tflops``, ``bandwidth_tbps``, ``how``)."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    share = seconds / (2 * len(MATRIX_SIZES) + 2)
    cores = os.cpu_count() or 1
    rates: dict[str, float] = {}
    for dtype, key in ((np.float32, "fp32"), (np.float64, "fp64")):
        best = 0.0
        for n in MATRIX_SIZES:
            a = np.random.default_rng(0).standard_normal((n, n)).astype(dtype)
            b = np.ascontiguousarray(a.T)
            until = time.perf_counter() + share
            product = functools.partial(np.matmul, a, b)
            best = max(best, _best_rate(product, 2.0 * n**3, until))
        rates[key] = best * cores / 1e12
    src = np.ones(COPY_BYTES // 4, dtype=np.float32)
    dst = np.empty_like(src)
    parts = [slice(i * len(src) // cores, (i + 1) * len(src) // cores) for i in range(cores)]
    with ThreadPoolExecutor(cores) as pool:

        def copy() -> None:
            list(pool.map(lambda part: np.copyto(dst[part], src[part]), parts))

        rate = _best_rate(copy, 2.0 * src.nbytes, time.perf_counter() + 2 * share)
    bandwidth = rate * cores / 1e12
    return {
        "host": socket.gethostname(),
        "cpu": cpu_name(),
        "cores": cores,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "tflops": rates,
        "bandwidth_tbps": bandwidth,
        "how": f"numpy {np.__version__}: the best rate per CPU second, times {cores} cores, of "
        f"repeated float32 and float64 products of {'/'.join(map(str, MATRIX_SIZES))}-square "
        f"matrices and of copies of {COPY_BYTES // 2**20} MiB over {cores} threads",
    }


def save_measured(record: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``record`` (from ``measure_peaks``) to the cache atomically; returns the path."""
    from perfkit_core.events.atomic import atomic_paths

    path = path or cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_paths(path) as (tmp,):
        Path(tmp).write_text(json.dumps(record, indent=1))
    return path


def read_measured(path: Path | None = None) -> dict[str, Any] | None:
    """The cached measurement, or None when there is none (or it cannot be read)."""
    path = path or cache_path()
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("tflops"), dict):
        return None
    return record


def _main_device(run: Run) -> dict[str, Any] | None:
    """The recorded device the run's device work ran on most (by device index), else the
    first recorded one."""
    devices = [d for d in run.meta.get("devices") or [] if isinstance(d, dict)]
    if not devices:
        return None
    ev = run.events
    on = ev["stream"].to_numpy() >= 0
    if on.any():
        import numpy as np

        index = ev["device_index"].to_numpy()[on]
        weights = ev["dur_ns"].to_numpy()[on].astype(float)
        values, inverse = np.unique(index, return_inverse=True)
        busiest = int(values[np.argmax(np.bincount(inverse, weights=weights))])
        for d in devices:
            if d.get("index") == busiest:
                return d
    return devices[0]


def run_peaks(
    run: Run, *, peak_tflops: float | None = None, peak_bandwidth: float | None = None
) -> Peaks | None:
    """The ceilings for ``run``: the user's (``peak_tflops`` TFLOP/s for every precision,
    ``peak_bandwidth`` TB/s) where given; else the datasheet figures of its GPU; else, for a
    run without device work, the peaks measured on this machine (``perfkit peaks``) when the
    run was recorded here (or does not say where). None when none is known (notes then say
    why, in the view)."""
    on_device = has_device(run)
    found: Peaks | None = None
    device = _main_device(run) if on_device else None
    if device is not None:
        entry = lookup_device(
            str(device.get("name") or ""),
            device.get("compute_capability"),
            device.get("total_memory_bytes"),
        )
        if entry is not None:
            notes = [AMD_TF32_NOTE] if entry.name.startswith("AMD") else []
            found = Peaks(entry.name, dict(entry.tflops), entry.bandwidth_tbps, entry.source, notes)
    elif not on_device:
        record = read_measured()
        host = run.meta.get("host")
        if record is not None and (not host or host == record.get("host")):
            found = Peaks(
                f"{record.get('cpu')} ({record.get('cores')} cores)",
                {k: float(v) for k, v in record["tflops"].items()},
                float(record.get("bandwidth_tbps") or 0.0),
                f"measured on {record.get('host')} at {record.get('measured_at')} by `perfkit peaks`",
            )
    if peak_tflops is None and peak_bandwidth is None:
        return found
    label = found.device if found else (str(device.get("name")) if device else "CPU")
    tflops = dict(found.tflops) if found else {}
    if peak_tflops is not None:
        tflops = {p: float(peak_tflops) for p in (*PRECISIONS, *tflops)}
    bandwidth = (
        float(peak_bandwidth)
        if peak_bandwidth is not None
        else (found.bandwidth_tbps if found else float("nan"))
    )
    return Peaks(label, tflops, bandwidth, "given (--peak-tflops/--peak-bandwidth)")
