"""The event table: one schema for every framework.

Every event a native profiler recorded becomes one row of a pandas DataFrame whose columns are
listed in :data:`COLUMNS`. Times are int64 nanoseconds, strings are categorical, links between
rows are int64 row positions (``-1`` for none), and measures that a profiler may not record are
float64 with NaN for "not recorded". ``docs/reference/schema.md`` is built from this module, so
the reference can never drift from the code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

#: Version of the event-table layout, stored in every saved run's metadata. Bump the minor
#: number for added columns or kinds, the major number for anything that changes a meaning.
SCHEMA_VERSION = "1.3"

#: Every value the ``kind`` column can take, with what it means.
KINDS: dict[str, str] = {
    "step": "one training step (torch ProfilerStep#N, paddle ProfileStep)",
    "operator": "a framework operator on the host (aten::addmm, matmul_v2, ...)",
    "operator_inner": "a stage inside an operator (paddle infer_meta, compute, kernel launch)",
    "kernel": "a device kernel",
    "memcpy": "a device memory copy (HtoD, DtoH, DtoD, PtoP)",
    "memset": "a device memory set",
    "runtime": "a device runtime or driver call on the host (cudaLaunchKernel, cudaMemcpyAsync)",
    "communication": "a collective or point-to-point communication (NCCL/gloo ops and kernels)",
    "dataloader": "fetching a batch from the data loader",
    "forward": "a span that marks the forward pass",
    "backward": "a span that marks (part of) the backward pass",
    "optimizer": "an optimizer step or zero_grad span",
    "user": "a user-defined span (torch record_function, paddle RecordEvent)",
    "python": "a Python function call recorded by the profiler's Python tracer",
    "memory": "an allocation (bytes > 0) or free (bytes < 0) instant",
    "profiler": "the profiler's own spans and markers (Kineto's `PyTorch Profiler (0)` span, `Iteration Start`, `Record Window End`): kept, but not counted as work or as part of the profiled span",
    "other": "anything else; the native category is kept in `category`",
}

KIND_ORDER: tuple[str, ...] = tuple(KINDS)


@dataclass(frozen=True)
class Column:
    """One column of the event table: its name, storage dtype, unit and meaning."""

    name: str
    dtype: str
    unit: str
    description: str
    missing: Any = None


#: The columns of the event table, in order. ``dtype`` "category" means pandas categorical
#: strings; "int64" columns use ``missing`` (usually -1) where a value does not apply.
COLUMNS: tuple[Column, ...] = (
    Column(
        "rank", "int32", "", "rank of the process in a distributed job (0 when not distributed)", 0
    ),
    Column("kind", "category", "", "what the event is; one of the kinds listed below"),
    Column("name", "category", "", "the event's name as the framework recorded it"),
    Column(
        "full_name",
        "category",
        "",
        "the operator's full name where the profiler records one beside its type (`name`): MindSpore's scoped name `Default/network-WithLossCell/_backbone-SequentialCell/0-Dense/MatMul-op0`; empty otherwise",
    ),
    Column(
        "category", "category", "", "the raw native category (Kineto `cat`, Paddle TracerEventType)"
    ),
    Column(
        "framework",
        "category",
        "",
        "framework that recorded the event: `torch`, `paddle`, `jax`, `tensorflow`, `mindspore`",
    ),
    Column(
        "start_ns",
        "int64",
        "ns",
        "start time, nanoseconds since the Unix epoch where the source says so",
    ),
    Column("dur_ns", "int64", "ns", "duration; 0 for instant events such as memory events"),
    Column(
        "device_type",
        "category",
        "",
        "`cpu` for host events; `gpu` (or the accelerator's type) for device events and device memory",
    ),
    Column(
        "device_index", "int32", "", "index of the device; -1 for host events and host memory", -1
    ),
    Column(
        "pid",
        "int64",
        "",
        "process id of the host process; -1 for device events and when unknown",
        -1,
    ),
    Column(
        "tid",
        "int64",
        "",
        "host thread id as recorded (may be negative when the profiler wrapped it); -1 for events that ran on a device or have no thread",
        -1,
    ),
    Column("stream", "int64", "", "device stream (queue) id; -1 for host events", -1),
    Column(
        "step",
        "int64",
        "",
        "number of the training step the event belongs to (a device event belongs to the step that launched it); -1 outside steps",
        -1,
    ),
    Column(
        "parent",
        "int64",
        "row",
        "row of the innermost host event on the same thread that encloses this one; -1 for a root",
        -1,
    ),
    Column(
        "correlation",
        "int64",
        "",
        "id shared by a runtime launch and the device events it launched; -1 for none",
        -1,
    ),
    Column(
        "external_id",
        "int64",
        "",
        "the framework's id tying device work to the operator that issued it (Kineto `External id`); -1 for none",
        -1,
    ),
    Column(
        "sequence",
        "int64",
        "",
        "autograd sequence number tying a forward op to its backward; -1 for none",
        -1,
    ),
    Column(
        "forward_op",
        "int64",
        "row",
        "for a backward op, the row of the forward op it differentiates (fwdbwd flow); -1 for none",
        -1,
    ),
    Column(
        "input_shapes",
        "category",
        "",
        "input shapes as recorded, e.g. `[[64, 64], [64]]`; empty when not recorded",
    ),
    Column(
        "input_dtypes",
        "category",
        "",
        'input dtypes as recorded, e.g. `["float", "float"]`; empty when not recorded',
    ),
    Column(
        "input_values",
        "category",
        "",
        'the values of scalar and list inputs as recorded (torch\'s `Concrete Inputs`), one text per input, e.g. `["", "", "", "[2, 2]", "[3, 3]", "[1, 1]", "1"]` for a strided convolution (stride, padding, dilation, groups); empty when not recorded',
    ),
    Column(
        "stack",
        "category",
        "",
        "recorded call stack, innermost frame first, frames separated by newlines; empty when not recorded",
    ),
    Column(
        "flops",
        "float64",
        "FLOP",
        "floating-point operations the op performed; NaN when not recorded",
        np.nan,
    ),
    Column(
        "bytes",
        "float64",
        "B",
        "bytes copied or set (memcpy, memset); bytes allocated (> 0) or freed (< 0) for memory events; the message size of a collective (communication events, where the profiler recorded it); NaN otherwise",
        np.nan,
    ),
    Column(
        "process_group",
        "category",
        "",
        "communication events: the process group of the collective as the profiler named it (e.g. `default_pg`); empty when not recorded",
    ),
    Column(
        "allocated_bytes",
        "float64",
        "B",
        "memory events: bytes allocated on the device after the event; NaN otherwise",
        np.nan,
    ),
    Column(
        "reserved_bytes",
        "float64",
        "B",
        "memory events: bytes reserved by the allocator after the event; NaN otherwise",
        np.nan,
    ),
    Column(
        "address",
        "int64",
        "",
        "memory events: the address allocated or freed (its 64 bits read as a signed integer), which pairs a free with its allocation; -1 where the profiler did not record it (torch before 1.10) and for other events",
        -1,
    ),
    Column("grid", "category", "", "kernel grid dimensions `x,y,z`; empty otherwise"),
    Column("block", "category", "", "kernel block dimensions `x,y,z`; empty otherwise"),
    Column(
        "registers",
        "float64",
        "",
        "registers per thread of a kernel; NaN when not recorded",
        np.nan,
    ),
    Column(
        "shared_memory",
        "float64",
        "B",
        "shared memory per block of a kernel; NaN when not recorded",
        np.nan,
    ),
    Column(
        "occupancy_pct",
        "float64",
        "%",
        "estimated achieved occupancy of a kernel; NaN when not recorded",
        np.nan,
    ),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
COLUMNS_BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
#: Columns that hold row positions; they shift when tables are concatenated.
ROW_LINK_COLUMNS: tuple[str, ...] = ("parent", "forward_op")
#: Keys of `Run.meta` and what they hold (documented in docs/reference/schema.md).
META_KEYS: dict[str, str] = {
    "schema_version": "version of this schema the run was written with",
    "framework": "`torch` or `paddle`",
    "framework_version": "version of the framework that recorded the run, when known",
    "host": "host name, when recorded",
    "devices": "list of devices: index, name, total memory (bytes), compute capability, SM count",
    "rank": "rank of the process (for a run of several ranks: the lowest)",
    "ranks": "every rank the run holds",
    "rank_recorded": "false when the trace did not say its rank (rank 0 assumed; a folder of such traces is numbered in file-name order)",
    "world_size": "number of ranks in the job (1 when not distributed)",
    "steps": "step numbers found in the run, in order",
    "source": "path of the trace the run was loaded from (a list for several ranks); null when the native trace was not kept",
    "span_ns": "[start, end] of the profiled window, in ns",
    "accounting": "how every native event was used: rows, flow events turned into links, metadata (for a run of several ranks: one entry per rank)",
    "threads": "host thread names by thread id, where the trace names them",
    "compute_threads": "host thread ids that run the steps' compute for the step's thread (XLA:CPU's executor threads, which run a jitted step's ops): the `family` view does not count their ops as data loading",
    "per_rank": "for a run of several ranks: host, devices, source and span of each rank",
    "extra": "framework-specific facts (profiler options, distributed backend, ...)",
    "run_id": "id of the save that wrote the run, also written in its event table's Parquet metadata (a saved job's: in every rank's file), so a folder whose files came from two saves is refused",
    "events": "rows of the saved event table (of every rank, for a saved job)",
    "missing_ranks": "for a job: the ranks whose traces could not be read, each with its `rank`, `source` and `reason`; left out of every figure",
}


def build_events(columns: Mapping[str, Any], n: int | None = None) -> pd.DataFrame:
    """Return an event table from a mapping of column name to array-like.

    Missing columns are filled with their ``missing`` value (or empty strings for categoricals);
    dtypes are coerced to the schema's. ``n`` is the row count when ``columns`` may be empty.
    Unknown column names raise ``ValueError``.
    """
    import pandas as pd

    unknown = set(columns) - set(COLUMN_NAMES)
    if unknown:
        raise ValueError(f"unknown event columns: {sorted(unknown)}")
    if n is None:
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            raise ValueError(f"event columns differ in length: {sorted(lengths)}")
        n = lengths.pop() if lengths else 0
    data: dict[str, Any] = {}
    for col in COLUMNS:
        value = columns.get(col.name)
        if col.dtype == "category":
            if value is None:
                data[col.name] = (
                    pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""])
                    if n
                    else pd.Categorical([], categories=[""])
                )
            elif col.name == "kind":
                data[col.name] = _kind_categorical(value)
            elif isinstance(value, pd.Categorical):
                data[col.name] = value
            else:
                data[col.name] = pd.Categorical(value)
        else:
            if value is None:
                data[col.name] = constant_column(col.missing, n, col.dtype)
            else:
                data[col.name] = _shared_if_constant(_cast(col, np.asarray(value)))
    return pd.DataFrame(data, copy=False)


def constant_column(value: Any, n: int, dtype: Any) -> np.ndarray:
    """A read-only column of ``n`` rows that all hold ``value``, in the memory of one value
    (a zero-stride view): a column a trace did not record (``flops``, ``forward_op``, the
    memory columns of a run without memory events) or one value for all rows (``rank``) costs
    nothing. Every row reads as in ``np.full``; writing to it raises, as writing to any
    column of a table does under pandas' copy-on-write."""
    if n == 0:
        return np.empty(0, dtype=dtype)
    return np.broadcast_to(np.array(value, dtype=dtype), (n,))


def _shared_if_constant(values: np.ndarray) -> np.ndarray:
    """``values`` as a ``constant_column`` when every row holds the first row's value (NaN
    included), else as it is."""
    if values.ndim != 1 or len(values) < 2 or values.strides == (0,):
        return values
    first = values[0]
    if values.dtype.kind == "f" and np.isnan(first):
        same = bool(np.isnan(values).all())
    else:
        same = bool((values == first).all())
    return constant_column(first, len(values), values.dtype) if same else values


def _cast(col: Column, value: np.ndarray) -> np.ndarray:
    """``value`` as the column's dtype; ``OverflowError`` where an integer would wrap around or a
    float is not a whole number in range (adapters check what they read first and say which
    event; this is the last line)."""
    target = np.dtype(col.dtype)
    if target.kind == "i" and value.dtype != target and value.dtype.kind in "iuf" and len(value):
        info = np.iinfo(target)
        if not ((value >= info.min) & (value <= info.max)).all():  # NaN fails both
            raise OverflowError(f"column {col.name!r} holds values that do not fit {col.dtype}")
    return value.astype(target, copy=False)


def _kind_categorical(value: Any) -> pd.Categorical:
    import pandas as pd

    cat = value if isinstance(value, pd.Categorical) else pd.Categorical(value)
    bad = set(cat.categories) - set(KIND_ORDER)
    if bad:
        raise ValueError(f"unknown event kinds: {sorted(bad)}")
    return cat.set_categories(list(KIND_ORDER))


def empty_events() -> pd.DataFrame:
    """Return an event table with every column and no rows."""
    return build_events({}, n=0)


def check_version(path: Any, meta: Mapping[str, Any]) -> None:
    """Raise ``TraceError`` for a saved run or job (at ``path``) written with another major
    schema version; older minor versions are read, their missing columns filled as not recorded.
    """
    from perfkit_core.errors import TraceError

    version = str(meta.get("schema_version", "0"))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise TraceError(
            path, f"saved with schema {version}, this perfkit reads schema {SCHEMA_VERSION}"
        )


def validate_events(events: pd.DataFrame) -> None:
    """Raise ``ValueError`` when ``events`` does not follow the schema (columns, dtypes, kinds)."""
    missing = [c for c in COLUMN_NAMES if c not in events.columns]
    if missing:
        raise ValueError(f"event table lacks columns {missing}")
    for col in COLUMNS:
        dtype = events[col.name].dtype
        if col.dtype == "category":
            if str(dtype) != "category":
                raise ValueError(f"column {col.name!r} should be categorical, is {dtype}")
        elif str(dtype) != col.dtype:
            raise ValueError(f"column {col.name!r} should be {col.dtype}, is {dtype}")
    kinds = set(events["kind"].cat.categories)
    if not kinds <= set(KIND_ORDER):
        raise ValueError(f"unknown event kinds {sorted(kinds - set(KIND_ORDER))}")


def codes_in(codes: np.ndarray, wanted: Iterable[int]) -> np.ndarray:
    """Which of ``codes`` (integer codes of a categorical column) are one of ``wanted``, as a
    numpy bool array: one comparison per wanted code, which for the handful of kinds a view
    asks about is tens of times faster than ``np.isin`` (it sorts or builds a table)."""
    mask = np.zeros(len(codes), dtype=bool)
    for code in wanted:
        mask |= codes == code
    return mask


@dataclass(frozen=True)
class CodedColumn:
    """A string column as integer ``codes`` into its ``categories`` (-1: missing), for masks by
    value that make no string per row."""

    codes: np.ndarray
    categories: tuple[str, ...]

    def among(self, *values: str) -> np.ndarray:
        """Which rows hold one of ``values``, as a numpy bool array."""
        index = {c: i for i, c in enumerate(self.categories)}
        return codes_in(self.codes, [index[v] for v in values if v in index])


def coded(column: pd.Series) -> CodedColumn:
    """``column`` (a string column, categorical or not) as a ``CodedColumn``."""
    import pandas as pd

    if not isinstance(column.dtype, pd.CategoricalDtype):
        column = column.astype("category")
    categories = tuple(str(c) for c in column.cat.categories)
    return CodedColumn(column.cat.codes.to_numpy(), categories)


def str_values(column: pd.Series) -> np.ndarray:
    """The values of a string column as a numpy array of ``str`` (what
    ``column.astype(str).to_numpy()`` returns). A categorical column's categories are converted
    once and indexed by its codes, which is hundreds of times faster on a big table. A missing
    value reads ``""`` (pandas gives a float NaN there, which no string test expects)."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = np.asarray(column.cat.categories.astype(str), dtype=object)
        return np.append(categories, "")[column.cat.codes.to_numpy()]
    return np.asarray(column.astype(str).to_numpy(), dtype=object)


def str_contains(column: pd.Series, pattern: Any, *, case: bool = True) -> np.ndarray:
    """Which values of a string column contain ``pattern`` (a regular expression, as pandas'
    ``column.astype(str).str.contains(pattern, case=case)``), as a numpy bool array. A
    categorical column is tested once per category and indexed by its codes: no string per row
    is made (on a 100k-event table, ``astype(str)`` makes several MB of them). A missing value
    never matches."""
    import pandas as pd

    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = pd.Series(column.cat.categories.astype(str), dtype=object)
        hits = categories.str.contains(pattern, case=case, regex=True).to_numpy(dtype=bool)
        return np.append(hits, False)[column.cat.codes.to_numpy()]
    found = column.astype(str).str.contains(pattern, case=case, regex=True)
    return found.fillna(False).to_numpy(dtype=bool)


def concat_events(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Return one event table made of ``tables`` in order, shifting row links to stay valid."""
    import pandas as pd
    from pandas.api.types import union_categoricals

    if not tables:
        return empty_events()
    if len(tables) == 1:
        return tables[0]
    offset = 0
    shifted = []
    for table in tables:
        t = table.copy()
        for link in ROW_LINK_COLUMNS:
            values = t[link].to_numpy()
            t[link] = np.where(values >= 0, values + offset, -1)
        offset += len(t)
        shifted.append(t)
    data: dict[str, Any] = {}
    for col in COLUMNS:
        if col.dtype == "category":
            merged = union_categoricals([t[col.name].array for t in shifted], ignore_order=True)
            if col.name == "kind":
                merged = merged.set_categories(list(KIND_ORDER))
            data[col.name] = merged
        else:
            data[col.name] = np.concatenate([t[col.name].to_numpy() for t in shifted])
    return pd.DataFrame(data, copy=False)
