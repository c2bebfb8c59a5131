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
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.events import (
    COLUMNS,
    TIME_LIMIT_NS,
    TraceError,
    check_values_range,
    note_skipped,
)
from perfkit_xla.hlo import hlo_ops
from perfkit_xla.kinds import CATEGORY_KINDS, device_of_plane
from perfkit_xla.plane_columns import (
    CATEGORIES,
    READ_STATS,
    PlaneColumns,
    categorical,
    stacked,
)
from perfkit_xla.stat_values import to_float as _float
from perfkit_xla.stat_values import to_int as _int
from perfkit_xla.wire import WireError
from perfkit_xla.xspace import XSpace, decode_xspace

if TYPE_CHECKING:
    from perfkit_core.events import Run

#: Line timestamps below this (about 3 years after 1970, in ns) are relative to the profile's
#: start, as the profilers normalize them; larger ones are already since the Unix epoch.
RELATIVE_BELOW_NS = 10**17


def read_xspace(path: str | Path, stats: Collection[str] | None = None) -> XSpace:
    """Return the decoded XSpace of ``path`` (gzip allowed); ``TraceError`` for bad input.
    ``stats``: the names of the event stats to read (None: all; see ``decode_xspace``)."""
    from perfkit_core.events import read_trace_bytes

    path = Path(path)
    data = read_trace_bytes(path)
    if not data:
        raise TraceError(path, "the file is empty")
    try:
        space = decode_xspace(data, stats)
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
    """Return the ``Run`` of a decoded XSpace (decoded with at least the event stats of
    ``READ_STATS``); ``source`` is the file it came from (for messages and ``meta["source"]``).
    ``TraceError`` when it holds no events."""
    import pandas as pd

    from perfkit_core.events import finish_events, make_run

    start_ns, stop_ns = _task_times(space)
    origin = start_ns or 0
    hlo = hlo_ops(space)
    threads: dict[str, str] = {}
    aggregated = 0
    devices: list[dict[str, Any]] = []
    planes_read: list[str] = []
    parts: list[PlaneColumns] = []
    # Per line: its start (ns), its rows, and the columns all its rows share.
    bases: list[int] = []
    counts: list[int] = []
    per_line: dict[str, list[Any]] = {k: [] for k in ("device", "index", "pid", "tid", "stream")}
    events = space.events
    stat_rows = np.flatnonzero(np.isin(events.stats.metadata_id, _read_ids(space)))
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
        part = PlaneColumns(space, plane, stat_rows, hlo, source)
        parts.append(part)
        for line in plane.lines:
            aggregated += line.aggregated
            bases.append(
                line.timestamp_ns + (origin if line.timestamp_ns < RELATIVE_BELOW_NS else 0)
            )
            counts.append(len(line.metadata_id))
            if device is None:
                threads[str(line.id)] = line.display_name or line.name
            per_line["device"].append(device[0] if device else "cpu")
            per_line["index"].append(device[1] if device else -1)
            per_line["pid"].append(part.pid)
            per_line["tid"].append(line.id if device is None else -1)
            per_line["stream"].append(-1 if device is None else line.id)
    n = len(events)
    if n == 0:
        raise TraceError(source, "the XSpace holds no timed events (no plane has events)")
    offset_ps = events.offset_ps
    dur_ps = events.duration_ps
    # Picosecond values within 2**62 round to ns without wrapping around int64.
    check_values_range(source, dur_ps, "duration_ps", low=0, high=2**62)
    check_values_range(source, offset_ps, "offset_ps", low=-(2**62), high=2**62)
    try:
        line_base = np.asarray(bases, dtype=np.int64)
    except OverflowError:
        raise TraceError(source, "a line's timestamp_ns is out of range") from None
    repeat = np.asarray(counts, dtype=np.int64)
    base_ns = np.repeat(line_base, repeat)
    check_values_range(
        source, base_ns, "line timestamp (ns)", low=-TIME_LIMIT_NS, high=TIME_LIMIT_NS
    )
    start = base_ns + (offset_ps + 500) // 1000
    del base_ns
    check_values_range(source, start, "start time (ns)", low=-TIME_LIMIT_NS, high=TIME_LIMIT_NS)
    dur = (dur_ps + 500) // 1000
    category_codes, category_first = pd.factorize(np.concatenate([p.category for p in parts]))
    category_names = [CATEGORIES[int(i)] for i in category_first]
    kinds = [CATEGORY_KINDS[c] for c in category_names]
    framework, version = _framework(space, set(category_names))
    columns: dict[str, Any] = {
        "rank": np.zeros(n, dtype=np.int32),
        "kind": pd.Categorical.from_codes(category_codes, categories=kinds)
        if len(set(kinds)) == len(kinds)
        else pd.Categorical(np.asarray(kinds, dtype=object)[category_codes]),
        "name": stacked([(p.name, p.names) for p in parts]),
        "category": pd.Categorical.from_codes(category_codes, categories=category_names),
        "framework": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [framework]),
        "start_ns": start,
        "dur_ns": dur,
        "device_type": categorical(np.repeat(np.arange(len(repeat)), repeat), per_line["device"]),
        "device_index": np.repeat(np.asarray(per_line["index"], dtype=np.int32), repeat),
        "pid": np.repeat(np.asarray(per_line["pid"], dtype=np.int64), repeat),
        "tid": np.repeat(np.asarray(per_line["tid"], dtype=np.int64), repeat),
        "stream": np.repeat(np.asarray(per_line["stream"], dtype=np.int64), repeat),
        "step": np.concatenate([p.step for p in parts]),
        "correlation": np.concatenate([p.correlation for p in parts]),
        "flops": np.concatenate([p.flops for p in parts]),
        "bytes": np.concatenate([p.nbytes for p in parts]),
        "input_shapes": stacked([(p.shapes, p.texts) for p in parts]),
        "input_dtypes": stacked([(p.dtypes, p.texts) for p in parts]),
        "stack": stacked([(p.stack, p.texts) for p in parts]),
    }
    del parts
    rows, layer_spans = add_scope_spans(columns, n, framework)
    events_table = finish_events(columns, rows, consume=True)
    host = events_table["stream"].to_numpy() < 0
    category = events_table["category"].array
    code = {c: i for i, c in enumerate(category.categories)}
    category_code = category.codes
    tid = events_table["tid"].to_numpy()
    step_threads = set(tid[host & (category_code == code.get("Step", -2))].tolist())
    data_threads = {int(t) for t, name in threads.items() if name.startswith("tf_data")}
    ops = [code[c] for c in ("XLA Op", "TF Op") if c in code]
    op_threads = set(tid[host & np.isin(category_code, ops)].tolist())
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
            "events_in_file": n + aggregated,
            "rows": rows,
            "aggregated_events": aggregated,
            "layer_spans_from_op_scopes": layer_spans,
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
        {"that count occurrences instead of recording a time": aggregated},
    )
    return make_run(events_table, meta)


_MISSING = {c.name: c.missing for c in COLUMNS}
#: Columns a span takes from its thread (from an op of the thread).
_PER_LINE = frozenset({"rank", "framework", "device_type", "device_index", "pid", "tid", "stream"})


def add_scope_spans(columns: dict[str, Any], n: int, framework: str) -> tuple[int, int]:
    """For a TensorFlow profile, put the layer spans of the TF ops' name scopes
    (``perfkit_xla.scopes``) in front of ``columns`` (``n`` rows) and link gradient ops to
    forward ops; returns the row count and the number of spans added (none for JAX)."""
    import pandas as pd

    from perfkit_xla.scopes import SCOPE_CATEGORY, scope_spans

    category: pd.Categorical = columns["category"]
    if framework != "tensorflow" or "TF Op" not in category.categories:
        return n, 0
    host = np.asarray(columns["stream"]) < 0
    is_op = host & (category.codes == category.categories.get_loc("TF Op"))
    op_rows = np.flatnonzero(is_op)
    names: pd.Categorical = columns["name"]
    name_cats = np.asarray(names.categories, dtype=object)
    op_names = name_cats[names.codes[op_rows]].tolist()
    start = np.asarray(columns["start_ns"], dtype=np.int64)
    dur = np.asarray(columns["dur_ns"], dtype=np.int64)
    tid = np.asarray(columns["tid"], dtype=np.int64)
    others = np.flatnonzero(host & ~is_op & (dur > 0))
    others = others[~_inside(others, op_rows, start, dur, tid)]
    spans, links = scope_spans(op_names, op_rows, start, dur, tid, others)
    if not spans:
        return n, 0
    k = len(spans)
    extra_start = np.array([s[2] for s in spans], dtype=np.int64)
    extra_end = np.array([s[3] for s in spans], dtype=np.int64)
    extra_tid = np.array([s[4] for s in spans], dtype=np.int64)
    # Every span is on a host thread the ops ran on: the other per-line columns are its ops'.
    op_threads, first = np.unique(tid[op_rows], return_index=True)
    like = op_rows[first[np.searchsorted(op_threads, extra_tid)]]

    def extend_categorical(values: list[str], column: pd.Categorical) -> pd.Categorical:
        return pd.api.types.union_categoricals(
            [pd.Categorical(values), column], sort_categories=True
        )

    # The spans go first: a span as long as its only op must sort before it to hold it.
    forward_op = np.full(k + n, -1, dtype=np.int64)
    for grad, fwd in links.items():
        forward_op[k + grad] = k + fwd
    for name, value in list(columns.items()):
        if name == "name":
            columns[name] = extend_categorical([s[0] for s in spans], value)
        elif name == "full_name":
            continue
        elif name == "kind":
            columns[name] = extend_categorical(["forward"] * k, value)
        elif name == "category":
            columns[name] = extend_categorical([SCOPE_CATEGORY] * k, value)
        elif name == "start_ns":
            columns[name] = np.concatenate([extra_start, start])
        elif name == "dur_ns":
            columns[name] = np.concatenate([extra_end - extra_start, dur])
        elif name in _PER_LINE:
            taken = np.concatenate([like, np.arange(n)])
            columns[name] = (
                value.take(taken) if isinstance(value, pd.Categorical) else np.asarray(value)[taken]
            )
        elif isinstance(value, pd.Categorical):
            columns[name] = extend_categorical([""] * k, value)
        else:
            array = np.asarray(value)
            missing = np.full(k, _MISSING[name], dtype=array.dtype)
            columns[name] = np.concatenate([missing, array])
    columns["full_name"] = pd.Categorical([s[1] for s in spans] + [""] * n)
    columns["forward_op"] = forward_op
    return n + k, k


def _inside(
    rows: np.ndarray, op_rows: np.ndarray, start: np.ndarray, dur: np.ndarray, tid: np.ndarray
) -> np.ndarray:
    """Whether each of ``rows`` lies within a TF op (``op_rows``) of its thread."""
    out = np.zeros(len(rows), dtype=bool)
    for thread in np.unique(tid[rows]).tolist():
        ops = op_rows[tid[op_rows] == thread]
        if len(ops) == 0:
            continue
        ops = ops[np.argsort(start[ops], kind="stable")]
        mine = np.flatnonzero(tid[rows] == thread)
        r = rows[mine]
        at = np.searchsorted(start[ops], start[r], side="right") - 1
        hit = ops[np.maximum(at, 0)]
        out[mine] = (at >= 0) & (start[r] + dur[r] <= start[hit] + dur[hit])
    return out


def _read_ids(space: XSpace) -> np.ndarray:
    """The stat metadata ids, of any plane, of the stats the loader reads (uint64)."""
    ids = {
        k
        for plane in space.planes
        for k, m in plane.stat_metadata.items()
        if m.name in READ_STATS and k >= 0
    }
    return np.array(sorted(ids), dtype=np.uint64)


def load_xplane(path: str | Path) -> Run:
    """Return the ``Run`` in one ``*.xplane.pb`` (TensorFlow or JAX profile); ``TraceError``
    naming the file for bad input."""
    path = Path(path)
    return run_from_xspace(read_xspace(path, READ_STATS), path)


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
