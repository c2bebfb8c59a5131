"""Read the profiles TensorFlow and JAX write: ``*.xplane.pb`` files (XSpace protobufs) and the
log folders that hold them (``LOG_DIR/plugins/profile/<run>/<host>.xplane.pb``).

Every event of every line becomes a row: host lines are threads (``tid`` is the line id, ``pid``
the plane's ``process_id``), device lines are streams (``stream`` is the line id). Times: an
event starts at its line's ``timestamp_ns`` plus its ``offset_ps``; the profilers write line
timestamps relative to the profile's start (the ``Task Environment`` plane's
``profile_start_time``), which is added back, so ``start_ns`` counts from the Unix epoch.
Picoseconds are rounded to the nearest nanosecond.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import TIME_LIMIT_NS, TraceError, check_values_range, note_skipped
from perfkit_xla.hlo import HloOp, hlo_ops
from perfkit_xla.kinds import CATEGORY_KINDS, device_category, device_of_plane, host_category
from perfkit_xla.xspace import WireError, XPlane, XSpace, decode_xspace

if TYPE_CHECKING:
    from perfkit_core.events import Run

#: Line timestamps below this (about 3 years after 1970, in ns) are relative to the profile's
#: start, as the profilers normalize them; larger ones are already since the Unix epoch.
RELATIVE_BELOW_NS = 10**17
#: Stats read into columns: stat name -> column.
STAT_COLUMNS: dict[str, str] = {
    "step_num": "step (rows of kind step)",
    "flops": "flops",
    "model_flops": "flops (when flops is absent)",
    "bytes_transferred": "bytes (memcpy, memset, communication rows)",
    "num_bytes": "bytes (memcpy, memset, communication rows)",
    "correlation_id": "correlation",
    "input_shapes": "input_shapes",
    "shape": "input_shapes (when input_shapes is absent)",
    "input_dtypes": "input_dtypes",
    "tf_op": "stack (the TensorFlow op's full name, for TF ops)",
    "hlo_module": "stack (the XLA module of an XLA op whose HLO the profile does not hold)",
}
_BYTES_CATEGORIES = frozenset({"Memcpy", "Memset", "Collective"})


def _int(value: Any, default: int = -1) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def read_xspace(path: str | Path) -> XSpace:
    """Return the decoded XSpace of ``path`` (gzip allowed); ``TraceError`` for bad input."""
    from perfkit_core.events import read_trace_bytes

    path = Path(path)
    data = read_trace_bytes(path)
    if not data:
        raise TraceError(path, "the file is empty")
    try:
        space = decode_xspace(data)
    except WireError as exc:
        raise TraceError(path, f"not an XSpace protobuf (*.xplane.pb): {exc}") from None
    if not space.planes:
        raise TraceError(path, "an XSpace without planes: the profiler recorded nothing")
    return space


def _task_times(space: XSpace) -> tuple[int | None, int | None]:
    for plane in space.planes:
        if plane.name == "Task Environment":
            stats = plane.named_stats(plane.stats)
            start = _int(stats.get("profile_start_time"), -1)
            stop = _int(stats.get("profile_stop_time"), -1)
            return (start if start > 0 else None), (stop if stop > 0 else None)
    return None, None


def _versions(space: XSpace) -> dict[str, str]:
    found: dict[str, str] = {}
    for plane in space.planes:
        if plane.name.startswith("/host:"):
            for key, value in plane.named_stats(plane.stats).items():
                if key.endswith("_version") and isinstance(value, str):
                    found[key] = value
    return found


class _Columns:
    """The columns the loader collects, one list per column."""

    def __init__(self) -> None:
        self.category: list[str] = []
        self.name: list[str] = []
        self.base: list[int] = []  # the line's start, ns
        self.offset: list[int] = []  # ps after the line's start
        self.dur: list[int] = []
        self.device_type: list[str] = []
        self.device_index: list[int] = []
        self.pid: list[int] = []
        self.tid: list[int] = []
        self.stream: list[int] = []
        self.step: list[int] = []
        self.correlation: list[int] = []
        self.flops: list[float] = []
        self.nbytes: list[float] = []
        self.shapes: list[str] = []
        self.dtypes: list[str] = []
        self.stack: list[str] = []


#: Every stat the loader reads (into columns, or to tell what an event is).
READ_STATS = frozenset(
    {*STAT_COLUMNS, "hlo_op", "hlo_module", "program_id", "perfkit", "tf_function_call"}
)


def _read_stats(
    plane: XPlane, read: dict[int, str], stats: list[tuple[int, Any]]
) -> dict[str, Any]:
    """The stats of ``stats`` the loader reads, by name (ref values resolved)."""
    out: dict[str, Any] = {}
    for key, value in stats:
        name = read.get(key)
        if name is not None:
            out[name] = plane.resolve(value)
    return out


def _add_plane(
    cols: _Columns,
    plane: XPlane,
    origin: int,
    threads: dict[str, str],
    counts: dict[str, int],
    hlo: dict[tuple[str, int], dict[str, HloOp]],
) -> None:
    device = device_of_plane(plane.name)
    plane_stats = plane.named_stats(plane.stats)
    pid = _int(plane_stats.get("process_id"), -1) if device is None else -1
    has_streams = device is not None and any(line.name.startswith("Stream") for line in plane.lines)
    meta = plane.event_metadata
    # Only the stats the loader reads are looked at (by id): the rest stay in the file.
    read = {k: m.name for k, m in plane.stat_metadata.items() if m.name in READ_STATS}
    nan = float("nan")
    for line in plane.lines:
        counts["aggregated"] += line.aggregated
        base = line.timestamp_ns + (origin if line.timestamp_ns < RELATIVE_BELOW_NS else 0)
        line_name = line.display_name or line.name
        if device is None:
            threads[str(line.id)] = line_name
        meta_stats: dict[int, dict[str, Any]] = {}
        for mid, offset, dur, raw in zip(
            line.metadata_id, line.offset_ps, line.event_duration_ps, line.event_stats, strict=True
        ):
            em = meta.get(mid)
            name = em.name if em is not None else f"<event metadata {mid}>"
            shared = meta_stats.get(mid)
            if shared is None:
                shared = _read_stats(plane, read, em.stats) if em is not None else {}
                meta_stats[mid] = shared
            stats = {**shared, **_read_stats(plane, read, raw)} if raw else shared
            if device is None:
                category = host_category(name, stats)
                cols.device_type.append("cpu")
                cols.device_index.append(-1)
                cols.pid.append(pid)
                cols.tid.append(line.id)
                cols.stream.append(-1)
            else:
                category = device_category(line_name, name, has_streams)
                cols.device_type.append(device[0])
                cols.device_index.append(device[1])
                cols.pid.append(-1)
                cols.tid.append(-1)
                cols.stream.append(line.id)
            cols.category.append(category)
            cols.name.append(name)
            cols.base.append(base)
            cols.offset.append(offset)
            cols.dur.append(dur)
            cols.step.append(_int(stats.get("step_num")) if category == "Step" else -1)
            cols.correlation.append(_int(stats.get("correlation_id")))
            flops = stats.get("flops", stats.get("model_flops"))
            cols.flops.append(_float(flops) if flops is not None else nan)
            nbytes = stats.get("bytes_transferred", stats.get("num_bytes"))
            cols.nbytes.append(
                _float(nbytes) if nbytes is not None and category in _BYTES_CATEGORIES else nan
            )
            shapes = stats.get("input_shapes", stats.get("shape"))
            dtypes = stats.get("input_dtypes")
            where = stats.get("tf_op") if category == "TF Op" else stats.get("hlo_module")
            op = _hlo_op(hlo, stats) if "hlo_op" in stats else None
            if op is not None:
                shapes = shapes if shapes is not None else op.input_shapes
                dtypes = dtypes if dtypes is not None else op.input_dtypes
                if op.op_name:
                    where = "\n".join(reversed(op.op_name.split("/")))
            cols.shapes.append(str(shapes) if shapes is not None else "")
            cols.dtypes.append(str(dtypes) if dtypes is not None else "")
            cols.stack.append(str(where) if where is not None and category != "Python" else "")


def _hlo_op(hlo: dict[tuple[str, int], dict[str, HloOp]], stats: dict[str, Any]) -> HloOp | None:
    """What the module's HLO proto says about the XLA op of an event (by its ``hlo_module``,
    ``program_id`` and ``hlo_op`` stats), or None."""
    ops = hlo.get((str(stats.get("hlo_module", "")), _int(stats.get("program_id"))))
    return ops.get(str(stats["hlo_op"])) if ops is not None else None


def _framework(space: XSpace, categories: set[str]) -> tuple[str, str | None]:
    """("jax", version) or ("tensorflow", version) from the host plane's version stats and the
    events; ("xla", None) when neither says."""
    versions = _versions(space)
    if "jax_version" in versions:
        return "jax", versions["jax_version"]
    for key in ("tf_version", "tensorflow_version"):
        if key in versions:
            return "tensorflow", versions[key]
    if "TF Op" in categories:
        return "tensorflow", None
    if "JAX Dispatch" in categories:
        return "jax", None
    return "xla", None


_HOST_FILE_RE = re.compile(r"^(?P<host>.+)\.xplane\.pb(\.gz)?$")


def run_from_xspace(space: XSpace, source: Path) -> Run:
    """Return the ``Run`` of a decoded XSpace; ``source`` is the file it came from (for
    messages and ``meta["source"]``). ``TraceError`` when it holds no events."""
    import pandas as pd

    from perfkit_core.events import finish_events, make_run

    start_ns, stop_ns = _task_times(space)
    origin = start_ns or 0
    cols = _Columns()
    hlo = hlo_ops(space)
    threads: dict[str, str] = {}
    counts = {"aggregated": 0}
    devices: list[dict[str, Any]] = []
    planes_read: list[str] = []
    for plane in space.planes:
        if not plane.lines:
            continue
        planes_read.append(plane.name)
        device = device_of_plane(plane.name)
        if device is not None:
            stats = plane.named_stats(plane.stats)
            devices.append(
                {
                    "type": device[0],
                    "index": device[1],
                    "name": str(stats.get("device_name", stats.get("device_type_string", "")))
                    or None,
                    "total_memory_bytes": _float(stats["memory_size"])
                    if "memory_size" in stats
                    else None,
                    "compute_capability": None,
                    "sm_count": None,
                }
            )
        _add_plane(cols, plane, origin, threads, counts, hlo)
    n = len(cols.name)
    if n == 0:
        raise TraceError(source, "the XSpace holds no timed events (no plane has events)")
    offset_ps = np.asarray(cols.offset, dtype=np.int64)
    dur_ps = np.asarray(cols.dur, dtype=np.int64)
    # Picosecond values within 2**62 round to ns without wrapping around int64.
    check_values_range(source, dur_ps, "duration_ps", low=0, high=2**62)
    check_values_range(source, offset_ps, "offset_ps", low=-(2**62), high=2**62)
    try:
        base_ns = np.asarray(cols.base, dtype=np.int64)
    except OverflowError:
        raise TraceError(source, "a line's timestamp_ns is out of range") from None
    check_values_range(
        source, base_ns, "line timestamp (ns)", low=-TIME_LIMIT_NS, high=TIME_LIMIT_NS
    )
    start = base_ns + (offset_ps + 500) // 1000
    check_values_range(source, start, "start time (ns)", low=-TIME_LIMIT_NS, high=TIME_LIMIT_NS)
    dur = (dur_ps + 500) // 1000
    category_codes, category_names = pd.factorize(np.asarray(cols.category, dtype=object))
    kinds = [CATEGORY_KINDS[str(c)] for c in category_names]
    framework, version = _framework(space, set(map(str, category_names)))
    columns: dict[str, Any] = {
        "rank": np.zeros(n, dtype=np.int32),
        "kind": pd.Categorical.from_codes(category_codes, categories=kinds)
        if len(set(kinds)) == len(kinds)
        else pd.Categorical(np.asarray(kinds, dtype=object)[category_codes]),
        "name": pd.Categorical(cols.name),
        "category": pd.Categorical.from_codes(
            category_codes, categories=[str(c) for c in category_names]
        ),
        "framework": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [framework]),
        "start_ns": start,
        "dur_ns": dur,
        "device_type": pd.Categorical(cols.device_type),
        "device_index": np.asarray(cols.device_index, dtype=np.int32),
        "pid": np.asarray(cols.pid, dtype=np.int64),
        "tid": np.asarray(cols.tid, dtype=np.int64),
        "stream": np.asarray(cols.stream, dtype=np.int64),
        "step": np.asarray(cols.step, dtype=np.int64),
        "correlation": np.asarray(cols.correlation, dtype=np.int64),
        "flops": np.asarray(cols.flops, dtype=np.float64),
        "bytes": np.asarray(cols.nbytes, dtype=np.float64),
        "input_shapes": pd.Categorical(cols.shapes),
        "input_dtypes": pd.Categorical(cols.dtypes),
        "stack": pd.Categorical(cols.stack),
    }
    events = finish_events(columns, n, consume=True)
    host = events["stream"].to_numpy() < 0
    category = events["category"].to_numpy()
    tid = events["tid"].to_numpy()
    step_threads = set(tid[host & (category == "Step")].tolist())
    data_threads = {int(t) for t, name in threads.items() if name.startswith("tf_data")}
    op_threads = set(tid[host & np.isin(category, ["XLA Op", "TF Op"])].tolist())
    # Threads that run ops for the step's thread: XLA:CPU's and TensorFlow's executor pools
    # (tf.data's own threads run the input pipeline, which is data loading).
    compute_threads = sorted(op_threads - step_threads - data_threads)
    match = _HOST_FILE_RE.match(source.name)
    host_name = space.hostnames[0] if space.hostnames else (match.group("host") if match else None)
    meta: dict[str, Any] = {
        "framework": framework,
        "framework_version": version,
        "host": host_name,
        "devices": devices,
        "rank": 0,
        "rank_recorded": False,
        "world_size": 1,
        "source": str(source),
        "accounting": {
            "events_in_file": n + counts["aggregated"],
            "rows": n,
            "aggregated_events": counts["aggregated"],
        },
        "threads": threads,
        "compute_threads": [int(t) for t in compute_threads],
        "extra": {
            "planes": planes_read,
            "profile_start_ns": start_ns,
            "profile_stop_ns": stop_ns,
            "versions": _versions(space),
            "xspace_errors": list(space.errors),
            "xspace_warnings": list(space.warnings),
        },
    }
    note_skipped(
        source,
        meta["accounting"],
        {"that count occurrences instead of recording a time": counts["aggregated"]},
    )
    return make_run(events, meta)


def load_xplane(path: str | Path) -> Run:
    """Return the ``Run`` in one ``*.xplane.pb`` (TensorFlow or JAX profile); ``TraceError``
    naming the file for bad input."""
    path = Path(path)
    return run_from_xspace(read_xspace(path), path)


def profile_runs(log_dir: Path) -> list[Path]:
    """The profile folders (``plugins/profile/<run>``) under ``log_dir`` that hold an
    ``*.xplane.pb``, oldest first (the profilers name them by time); ``log_dir`` itself when it
    holds ``*.xplane.pb`` files directly."""
    if any(_xplanes(log_dir)):
        return [log_dir]
    base = log_dir / "plugins" / "profile"
    try:
        if not base.is_dir():
            return []
        return sorted(d for d in base.iterdir() if d.is_dir() and any(_xplanes(d)))
    except OSError as exc:
        raise TraceError(base, f"cannot list the folder: {exc.strerror or exc}") from None


def _xplanes(folder: Path) -> list[Path]:
    try:
        return sorted(
            p
            for p in folder.iterdir()
            if _HOST_FILE_RE.match(p.name) and not p.name.startswith(".")
        )
    except OSError:
        return []


def load_log_dir(log_dir: str | Path, *, run: str | None = None) -> Run:
    """Return the ``Run`` of a TensorFlow or JAX log folder: the newest profile under
    ``LOG_DIR/plugins/profile/`` (or the one named ``run``), or a profile folder itself. A
    profile of several hosts (one ``<host>.xplane.pb`` each) becomes one run of several ranks,
    numbered in file-name order."""
    from perfkit_core.events import combine_runs

    log_dir = Path(log_dir)
    runs = profile_runs(log_dir)
    if not runs:
        raise TraceError(log_dir, "holds no *.xplane.pb profile (nor plugins/profile/<run>/)")
    if run is not None:
        chosen = [r for r in runs if r.name == run]
        if not chosen:
            names = ", ".join(r.name for r in runs)
            raise TraceError(log_dir, f"no profile named {run!r} (profiles: {names})")
        folder = chosen[0]
    else:
        folder = runs[-1]
    loaded = [load_xplane(f) for f in _xplanes(folder)]
    combined = combine_runs(loaded)
    if len(runs) > 1:
        combined.meta.setdefault("extra", {})["other_profiles"] = [
            r.name for r in runs if r != folder
        ]
    return combined


def is_log_dir(path: Path) -> bool:
    """Whether ``path`` is a folder that holds a TensorFlow/JAX profile (see ``profile_runs``)."""
    try:
        return path.is_dir() and bool(profile_runs(path))
    except TraceError:
        return False


def sibling_xplane(path: Path) -> Path | None:
    """The ``<host>.xplane.pb`` beside a ``<host>.trace.json.gz`` (the trace viewer's data the
    profilers write with it), if there is one."""
    name = path.name
    for suffix in (".trace.json.gz", ".trace.json"):
        if name.endswith(suffix):
            candidate = path.with_name(name[: -len(suffix)] + ".xplane.pb")
            try:
                return candidate if candidate.is_file() else None
            except OSError:  # a sibling that cannot be reached: read the trace itself
                return None
    return None
