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

from perfkit_core.events import TIME_LIMIT_NS, TraceError, check_values_range, note_skipped
from perfkit_xla.hlo import HloOp, ModuleOps, hlo_ops
from perfkit_xla.kinds import CATEGORY_KINDS, device_category, device_of_plane, host_category
from perfkit_xla.stat_values import OBJECT, PlaneStats
from perfkit_xla.stat_values import to_float as _float
from perfkit_xla.stat_values import to_int as _int
from perfkit_xla.wire import WireError
from perfkit_xla.xspace import XPlane, XSpace, decode_xspace

if TYPE_CHECKING:
    import pandas as pd

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


#: Every stat the loader reads (into columns, or to tell what an event is).
READ_STATS = frozenset(
    {*STAT_COLUMNS, "hlo_op", "hlo_module", "program_id", "perfkit", "tf_function_call"}
)
#: Stats that give an event's shapes, dtypes or call stack (read per distinct combination).
_TEXT_STATS = ("input_shapes", "shape", "input_dtypes", "tf_op", "hlo_module", "hlo_op")
#: Every native category, in a fixed order (``_Plane.category`` indexes it).
_CATEGORIES = list(CATEGORY_KINDS)
_CATEGORY_INDEX = {c: i for i, c in enumerate(_CATEGORIES)}


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


class _Plane:
    """The columns of one plane's events (rows ``plane.first`` to ``plane.stop`` of the
    XSpace's event table), computed in bulk: ``name`` (codes into ``names``), ``category``
    (codes into ``_CATEGORIES``), the per-line columns and the stat columns."""

    def __init__(
        self,
        space: XSpace,
        plane: XPlane,
        stat_rows: np.ndarray,
        hlo: dict[tuple[str, int], ModuleOps],
        source: Path,
    ) -> None:
        events = space.events
        n = plane.stop - plane.first
        self.n = n
        device = device_of_plane(plane.name)
        self.device = device
        plane_stats = plane.named_stats(plane.stats)
        self.pid = _int(plane_stats.get("process_id"), -1) if device is None else -1
        distinct, inverse = np.unique(
            events.metadata_id[plane.first : plane.stop], return_inverse=True
        )
        metadata = [plane.event_metadata.get(int(m)) for m in distinct]
        self.names = [
            em.name if em is not None else f"<event metadata {int(m)}>"
            for m, em in zip(distinct, metadata, strict=True)
        ]
        self.name = inverse
        # Only the stats the loader reads are looked at (by id): the rest stay in the file.
        read = {k: m.name for k, m in plane.stat_metadata.items() if m.name in READ_STATS}
        ids = np.array([k for k in read if k >= 0], dtype=np.uint64)
        rows = stat_rows[
            (events.stats.event[stat_rows] >= plane.first)
            & (events.stats.event[stat_rows] < plane.stop)
        ]
        rows = rows[np.isin(events.stats.metadata_id[rows], ids)]
        stats = PlaneStats(plane, events.stats, rows, read, metadata, inverse)
        self.category = self._categories(plane, stats, inverse)
        category = self.category
        step = category == _CATEGORY_INDEX["Step"]
        self.step = stats.ints(stats.get("step_num"), n, step, source, "step_num")
        self.correlation = stats.ints(
            stats.get("correlation_id"), n, np.ones(n, dtype=bool), source, "correlation_id"
        )
        self.flops = stats.floats(stats.either("flops", "model_flops"), n)
        nbytes = stats.floats(stats.either("bytes_transferred", "num_bytes"), n)
        moves = np.isin(category, [_CATEGORY_INDEX[c] for c in _BYTES_CATEGORIES])
        self.nbytes = np.where(moves, nbytes, np.nan)
        self.texts, self.shapes, self.dtypes, self.stack = self._texts(stats, hlo)

    def _categories(self, plane: XPlane, stats: PlaneStats, inverse: np.ndarray) -> np.ndarray:
        """The native category of each event (index into ``_CATEGORIES``)."""
        n = self.n
        if self.device is None:
            # What host_category looks at: the name, three stats' presence and perfkit="user".
            user = np.zeros(n, dtype=bool)
            perfkit = stats.get("perfkit")
            if perfkit is not None:
                objects = np.flatnonzero(perfkit.kind == OBJECT)
                marks = [stats.objects[int(i)] == "user" for i in perfkit.bits[objects]]
                user[objects[np.array(marks, dtype=bool)]] = True
            flags = (
                stats.present("step_num", n).astype(np.int64)
                | stats.present("hlo_op", n) << 1
                | stats.present("tf_op", n) << 2
                | user << 3
            )
            keys, where = np.unique(inverse * 16 + flags, return_inverse=True)
            found = []
            for k in keys.tolist():
                name, f = self.names[k >> 4], k & 15
                marked: dict[str, object] = {
                    stat: 0
                    for bit, stat in ((1, "step_num"), (2, "hlo_op"), (4, "tf_op"))
                    if f & bit
                }
                if f & 8:
                    marked["perfkit"] = "user"
                found.append(_CATEGORY_INDEX[host_category(name, marked)])
            return np.array(found, dtype=np.int64)[where]
        has_streams = any(line.name.startswith("Stream") for line in plane.lines)
        out = np.empty(n, dtype=np.int64)
        for line in plane.lines:
            lo, hi = line.first - plane.first, line.first - plane.first + len(line.metadata_id)
            if hi == lo:
                continue
            line_name = line.display_name or line.name
            keys, where = np.unique(inverse[lo:hi], return_inverse=True)
            found = [
                _CATEGORY_INDEX[device_category(line_name, self.names[k], has_streams)]
                for k in keys.tolist()
            ]
            out[lo:hi] = np.array(found, dtype=np.int64)[where]
        return out

    def _texts(
        self, stats: PlaneStats, hlo: dict[tuple[str, int], ModuleOps]
    ) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
        """The shapes, dtypes and call stack of each event, from its stats and its XLA op's HLO:
        (texts, and per event the index in texts of each of the three)."""
        n = self.n
        texts = [""]
        shapes = np.zeros(n, dtype=np.int64)
        dtypes = np.zeros(n, dtype=np.int64)
        stack = np.zeros(n, dtype=np.int64)
        columns = {name: stats.get(name) for name in (*_TEXT_STATS, "program_id")}
        some = np.zeros(n, dtype=bool)
        for name in _TEXT_STATS:
            some |= stats.present(name, n)
        rows = np.flatnonzero(some)
        if not rows.size:
            return texts, shapes, dtypes, stack
        import pandas as pd

        category = self.category[rows]
        key = (category == _CATEGORY_INDEX["TF Op"]) * 2 + (category == _CATEGORY_INDEX["Python"])
        for column in columns.values():
            codes = stats.codes(column, rows) + 1
            key = pd.factorize(key * (int(codes.max()) + 1) + codes)[0]
        distinct, first = np.unique(key, return_index=True)
        index: dict[str, int] = {"": 0}
        found = np.zeros((len(distinct), 3), dtype=np.int64)
        for j, row in enumerate(rows[first].tolist()):
            values = {
                name: value
                for name, column in columns.items()
                if (value := stats.value(column, row)) is not None
            }
            category_name = _CATEGORIES[int(self.category[row])]
            for i, text in enumerate(_event_texts(values, category_name, hlo)):
                found[j, i] = index.setdefault(text, len(index))
        texts = list(index)
        where = np.searchsorted(distinct, key)
        shapes[rows] = found[where, 0]
        dtypes[rows] = found[where, 1]
        stack[rows] = found[where, 2]
        return texts, shapes, dtypes, stack


def _event_texts(
    stats: dict[str, Any], category: str, hlo: dict[tuple[str, int], ModuleOps]
) -> tuple[str, str, str]:
    """(input shapes, input dtypes, call stack) of an event with ``stats`` (by name) and
    ``category``: from its stats, else from its XLA op's HLO."""
    shapes = stats.get("input_shapes", stats.get("shape"))
    dtypes = stats.get("input_dtypes")
    where = stats.get("tf_op") if category == "TF Op" else stats.get("hlo_module")
    op = _hlo_op(hlo, stats) if "hlo_op" in stats else None
    if op is not None:
        shapes = shapes if shapes is not None else op.input_shapes
        dtypes = dtypes if dtypes is not None else op.input_dtypes
        if op.op_name:
            where = "\n".join(reversed(op.op_name.split("/")))
    return (
        str(shapes) if shapes is not None else "",
        str(dtypes) if dtypes is not None else "",
        str(where) if where is not None and category != "Python" else "",
    )


def _hlo_op(hlo: dict[tuple[str, int], ModuleOps], stats: dict[str, Any]) -> HloOp | None:
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


def _categorical(codes: np.ndarray, values: list[str]) -> pd.Categorical:
    """The categorical of ``values[codes]``, its categories the values used, sorted (as
    ``pd.Categorical(list_of_strings)`` makes them); ``values`` may repeat."""
    import pandas as pd

    used = np.bincount(codes, minlength=len(values)) > 0
    categories = sorted({v for v, u in zip(values, used.tolist(), strict=True) if u})
    position = {c: i for i, c in enumerate(categories)}
    remap = np.array([position.get(v, -1) for v in values], dtype=np.int64)
    return pd.Categorical.from_codes(remap[codes], categories=categories)


def _stacked(parts: list[tuple[np.ndarray, list[str]]]) -> pd.Categorical:
    """One categorical of the parts' (codes, values), in order."""
    codes: list[np.ndarray] = []
    values: list[str] = []
    for part_codes, part_values in parts:
        codes.append(part_codes + len(values))
        values.extend(part_values)
    return _categorical(np.concatenate(codes), values)


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
    parts: list[_Plane] = []
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
        part = _Plane(space, plane, stat_rows, hlo, source)
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
    category_names = [_CATEGORIES[int(i)] for i in category_first]
    kinds = [CATEGORY_KINDS[c] for c in category_names]
    framework, version = _framework(space, set(category_names))
    columns: dict[str, Any] = {
        "rank": np.zeros(n, dtype=np.int32),
        "kind": pd.Categorical.from_codes(category_codes, categories=kinds)
        if len(set(kinds)) == len(kinds)
        else pd.Categorical(np.asarray(kinds, dtype=object)[category_codes]),
        "name": _stacked([(p.name, p.names) for p in parts]),
        "category": pd.Categorical.from_codes(category_codes, categories=category_names),
        "framework": pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [framework]),
        "start_ns": start,
        "dur_ns": dur,
        "device_type": _categorical(np.repeat(np.arange(len(repeat)), repeat), per_line["device"]),
        "device_index": np.repeat(np.asarray(per_line["index"], dtype=np.int32), repeat),
        "pid": np.repeat(np.asarray(per_line["pid"], dtype=np.int64), repeat),
        "tid": np.repeat(np.asarray(per_line["tid"], dtype=np.int64), repeat),
        "stream": np.repeat(np.asarray(per_line["stream"], dtype=np.int64), repeat),
        "step": np.concatenate([p.step for p in parts]),
        "correlation": np.concatenate([p.correlation for p in parts]),
        "flops": np.concatenate([p.flops for p in parts]),
        "bytes": np.concatenate([p.nbytes for p in parts]),
        "input_shapes": _stacked([(p.shapes, p.texts) for p in parts]),
        "input_dtypes": _stacked([(p.dtypes, p.texts) for p in parts]),
        "stack": _stacked([(p.stack, p.texts) for p in parts]),
    }
    del parts
    events_table = finish_events(columns, n, consume=True)
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
            "rows": n,
            "aggregated_events": aggregated,
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
    if not base.is_dir():
        return []
    try:
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
            return candidate if candidate.is_file() else None
    return None
