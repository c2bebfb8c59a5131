"""How each built-in view combines the ranks of a job (the rules ``perfkit_core.views.multirank.across``
applies): which columns are keys, sums (mean per rank), maxima and minima, and how the derived
columns (averages, shares, rates) are recomputed from the combined figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from perfkit_core.views.multirank.across import Combiner, MeanRule

if TYPE_CHECKING:
    import pandas as pd


def _ratio(num: Any, den: Any) -> Any:
    """``num / den`` where ``den > 0``, NaN elsewhere (arrays or scalars)."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _sort_desc(frame: pd.DataFrame, column: str, *also: str) -> pd.DataFrame:
    return frame.sort_values(
        [column, "name", *also], ascending=[False, True, *[True] * len(also)], kind="stable"
    )


# ------------------------------------------------------------------ operator, user


def _finish_host_table(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    frame["cpu_avg_ns"] = _ratio(frame["cpu_total_ns"], frame["calls"])
    frame["gpu_avg_ns"] = _ratio(frame["gpu_total_ns"], frame["calls"])
    if "flops" in frame.columns:
        gpu = frame["gpu_total_ns"].fillna(0).to_numpy()
        seconds = np.where(gpu > 0, gpu, frame["cpu_total_ns"].to_numpy()) / 1e9
        frame["gflops_per_s"] = _ratio(frame["flops"].to_numpy() / 1e9, seconds)
    sort_by = options.get("sort_by", "cpu_total")
    column = "calls" if sort_by == "calls" else f"{sort_by}_ns"
    if "level" not in frame.columns:
        if sort_by == "name":
            return frame.sort_values("name", kind="stable")
        return _sort_desc(frame, column)
    # op_detail: operators sorted, each followed by its detail rows (largest first).
    import pandas as pd

    ops = frame[frame["level"] == 0]
    ops = ops.sort_values("name", kind="stable") if sort_by == "name" else _sort_desc(ops, column)
    detail = frame[frame["level"] != 0]
    detail = detail.assign(
        _t=detail["cpu_total_ns"].fillna(0) + detail["gpu_total_ns"].fillna(0)
    ).sort_values("_t", ascending=False, kind="stable")
    by_op = {name: group.drop(columns="_t") for name, group in detail.groupby("detail_of")}
    pieces = []
    for _, row in ops.iterrows():
        pieces.append(row.to_frame().T)
        if row["name"] in by_op:
            pieces.append(by_op[row["name"]])
    out = pd.concat(pieces, ignore_index=True) if pieces else ops
    out["level"] = out["level"].astype(np.int64)
    for col in out.columns:
        if col.endswith(("_ns", "_per_s")) or col in ("calls", "flops"):
            out[col] = out[col].astype(np.float64)
    return out


HOST_TABLE = MeanRule(
    keys=("name",),
    optional_keys=("tid", "input_shapes", "stack", "level", "detail_of"),
    sums=("calls", "cpu_total_ns", "cpu_self_ns", "gpu_total_ns", "gpu_self_ns", "flops"),
    maxes=("cpu_max_ns", "gpu_max_ns"),
    mins=("cpu_min_ns", "gpu_min_ns"),
    finish=_finish_host_table,
)

# ------------------------------------------------------------------ kernel, memcpy, memory


def _prepare_kernels(frame: pd.DataFrame) -> pd.DataFrame:
    # Occupancy is a duration-weighted mean per rank; across ranks it is weighted by each
    # rank's time in the kernel in turn.
    recorded = frame["occupancy_pct"].notna()
    return frame.assign(
        _occ_weight=(frame["occupancy_pct"] * frame["gpu_total_ns"]).where(recorded),
        _occ_calls=frame["gpu_total_ns"].where(recorded),
    )


def _finish_kernels(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    frame["gpu_avg_ns"] = _ratio(frame["gpu_total_ns"], frame["calls"])
    frame["gpu_ratio_pct"] = 100.0 * _ratio(frame["gpu_total_ns"], frame["gpu_total_ns"].sum())
    frame["occupancy_pct"] = _ratio(frame["_occ_weight"], frame["_occ_calls"])
    return _sort_desc(frame, "gpu_total_ns")


KERNEL = MeanRule(
    keys=("name",),
    sums=("calls", "gpu_total_ns", "_occ_weight", "_occ_calls"),
    maxes=("gpu_max_ns", "registers", "shared_memory_bytes"),
    mins=("gpu_min_ns",),
    firsts=("grid", "block", "tensor_cores"),
    prepare=_prepare_kernels,
    finish=_finish_kernels,
)


def _finish_memcpy(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    frame["gpu_avg_ns"] = _ratio(frame["gpu_total_ns"], frame["calls"])
    frame["gb_per_s"] = _ratio(frame["bytes"], frame["gpu_total_ns"])
    return _sort_desc(frame, "gpu_total_ns")


MEMCPY = MeanRule(
    keys=("name", "operation", "direction", "host_memory", "synchronous"),
    sums=("calls", "gpu_total_ns", "bytes"),
    maxes=("gpu_max_ns",),
    mins=("gpu_min_ns",),
    finish=_finish_memcpy,
)

MEMORY_BY_OP = MeanRule(
    keys=("name", "device"),
    sums=(
        "allocations",
        "allocated_bytes",
        "freed_later_bytes",
        "held_bytes",
        "frees",
        "freed_bytes",
    ),
    finish=lambda frame, options: _sort_desc(frame, "allocated_bytes"),
)


def memory_rule(options: dict[str, Any]) -> Combiner:
    """The memory view: by op, the mean per rank; by device or step, the rows of each rank."""
    from perfkit_core.views.multirank.across import ConcatCombiner, MeanCombiner

    if options.get("by", "op") in ("device", "step"):
        return ConcatCombiner(options)
    return MeanCombiner(MEMORY_BY_OP, options)


#: The per-device columns of the memory timeline (``<device><suffix>``).
MEMORY_TIMELINE_SUFFIXES = ("_peak_allocated_bytes", "_peak_above_start_bytes")


class MemoryTimelineCombiner(Combiner):
    """The memory timeline of a job: each rank's steps cut into the same slices (lined up by
    slice number); in each slice, the highest peak of any rank's devices of a type."""

    how = (
        "each of {n} ranks' steps cut into the same slices; each cell: the highest peak of any "
        "rank's devices of that type in the slice"
    )

    def __init__(self, options: dict[str, Any]) -> None:
        super().__init__(options)
        self.peaks: dict[tuple[int, str], float] = {}
        self.names: dict[int, str] = {}
        self.offsets: dict[int, list[int]] = {}

    def _add(self, rank: int, frame: pd.DataFrame) -> None:
        if frame.empty or "slice" not in frame.columns:
            return
        slices = frame["slice"].to_numpy().astype(np.int64)
        for index, offset, name in zip(
            slices.tolist(), frame["offset_ns"].tolist(), frame["name"].tolist(), strict=True
        ):
            self.offsets.setdefault(index, []).append(int(offset))
            self.names.setdefault(index, str(name))
        for column in frame.columns:
            suffix = next((s for s in MEMORY_TIMELINE_SUFFIXES if column.endswith(s)), None)
            if suffix is None:
                continue
            kind = column[: -len(suffix)].split(":")[0] + suffix
            values = frame[column].to_numpy().astype(np.float64)
            for index, value in zip(slices.tolist(), values.tolist(), strict=True):
                if value == value:  # not NaN
                    key = (index, kind)
                    self.peaks[key] = max(self.peaks.get(key, float("-inf")), value)

    def _result(self) -> pd.DataFrame:
        import pandas as pd

        kinds = sorted({k for _, k in self.peaks})
        rows = []
        for index in sorted(self.offsets):
            offset = int(np.mean(self.offsets[index]))
            row: dict[str, Any] = {"name": self.names[index], "offset_ns": offset, "slice": index}
            for kind in kinds:
                row[kind] = self.peaks.get((index, kind), np.nan)
            rows.append(row)
        columns = ["name", "offset_ns", "slice", *kinds]
        return pd.DataFrame(rows, columns=columns)


# ------------------------------------------------------------------ model, phases, family


def _finish_model_spans(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    step = frame[frame["name"] == "step"]
    step_cpu = float(step["cpu_total_ns"].iloc[0]) if len(step) else np.nan
    step_gpu = float(step["gpu_total_ns"].iloc[0]) if len(step) else np.nan
    frame["cpu_avg_ns"] = _ratio(frame["cpu_total_ns"], frame["calls"])
    frame["gpu_avg_ns"] = _ratio(frame["gpu_total_ns"], frame["calls"])
    frame["cpu_ratio_pct"] = 100.0 * _ratio(frame["cpu_total_ns"], step_cpu)
    frame["gpu_ratio_pct"] = 100.0 * _ratio(frame["gpu_total_ns"], step_gpu)
    return frame


MODEL_SPANS = MeanRule(
    keys=("name",),
    sums=("calls", "cpu_total_ns", "gpu_total_ns"),
    maxes=("cpu_max_ns", "gpu_max_ns"),
    mins=("cpu_min_ns", "gpu_min_ns"),
    finish=_finish_model_spans,
    how="mean per rank over {n} ranks (shares of the mean rank's step); maxima and minima over "
    "all ranks",
)


def _finish_model(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    step = frame[frame["name"] == "step"]
    step_ns = float(step["per_step_ns"].iloc[0]) if len(step) else np.nan
    frame["step_pct"] = 100.0 * _ratio(frame["per_step_ns"], step_ns)
    if "gpu_per_step_ns" in frame.columns:
        gpu = float(step["gpu_per_step_ns"].iloc[0]) if len(step) else np.nan
        frame["gpu_share_pct"] = 100.0 * _ratio(frame["gpu_per_step_ns"], gpu)
    return frame


MODEL = MeanRule(
    keys=("name",),
    sums=("steps", "per_step_ns", "gpu_per_step_ns"),
    maxes=("max_per_step_ns",),
    mins=("min_per_step_ns",),
    finish=_finish_model,
    how="mean per rank over {n} ranks (shares of the mean rank's step); maxima and minima over "
    "all ranks",
)

PHASES = MeanRule(
    keys=("name", "step"),
    sums=("step_ns", "data_ns", "forward_ns", "backward_ns", "optimizer_ns", "other_ns"),
    per_present=True,
    how="each step: the mean over the ranks that recorded it ({n} ranks)",
)


def _finish_family(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    # A rank's families add up to its step, so the mean rank's add up to the mean step.
    frame["step_pct"] = 100.0 * _ratio(frame["per_step_ns"], frame["per_step_ns"].sum())
    if "gpu_per_step_ns" in frame.columns:
        gpu = frame["gpu_per_step_ns"]
        frame["gpu_share_pct"] = 100.0 * _ratio(gpu, gpu.sum())
        return _sort_desc(frame, "gpu_per_step_ns")
    return _sort_desc(frame, "per_step_ns")


FAMILY = MeanRule(
    keys=("name", "family", "direction"),
    sums=("per_step_ns", "gpu_per_step_ns"),
    finish=_finish_family,
    how="mean per rank over {n} ranks (a rank without the family counts 0)",
)

# ------------------------------------------------------------------ overview, benchmark


def _finish_overview(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    step = frame[frame["name"] == "step"]
    total = float(step["cpu_per_step_ns"].iloc[0]) if len(step) else np.nan
    frame["cpu_ratio_pct"] = 100.0 * _ratio(frame["cpu_per_step_ns"], total)
    frame["gpu_ratio_pct"] = 100.0 * _ratio(frame["gpu_per_step_ns"], total)
    return frame


OVERVIEW = MeanRule(
    keys=("name",),
    sums=("calls_per_step", "cpu_per_step_ns", "gpu_per_step_ns"),
    finish=_finish_overview,
    how="mean per rank over {n} ranks (shares of the mean rank's step)",
)

BENCHMARK = MeanRule(
    keys=("name", "unit"),
    sums=("avg",),
    maxes=("max",),
    mins=("min",),
    per_present=True,
    how="avg: the mean of the {n} ranks' averages; max and min over every rank's steps",
)


def _finish_breakdown(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    frame["ratio_pct"] = 100.0 * _ratio(frame["time_ns"], frame["time_ns"].sum())
    return frame


BREAKDOWN = MeanRule(
    keys=("name",),
    sums=("time_ns",),
    finish=_finish_breakdown,
    how="mean per rank over {n} ranks (shares of the mean rank's step)",
)


def breakdown_rule(options: dict[str, Any]) -> Combiner:
    """The breakdown view: parts, the mean per rank; per step, every rank's steps."""
    from perfkit_core.views.multirank.across import ConcatCombiner, MeanCombiner

    if options.get("per_step"):
        return ConcatCombiner(options)
    return MeanCombiner(BREAKDOWN, options)


def _prepare_launches(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.assign(_runtime_total=frame["runtime_avg_ns"] * frame["launches"])


def _finish_launches(frame: pd.DataFrame, options: dict[str, Any]) -> pd.DataFrame:
    frame["launch_delay_avg_ns"] = _ratio(frame["launch_delay_total_ns"], frame["launches"])
    frame["runtime_avg_ns"] = _ratio(frame["_runtime_total"], frame["launches"])
    return _sort_desc(frame, "launch_delay_total_ns")


LAUNCHES = MeanRule(
    keys=("name",),
    sums=("launches", "launch_delay_total_ns", "_runtime_total"),
    maxes=("launch_delay_max_ns",),
    prepare=_prepare_launches,
    finish=_finish_launches,
)


#: The across-ranks rule of each built-in view (see ``perfkit_core.views.multirank.across``).
ACROSS: dict[str, Any] = {
    "operator": HOST_TABLE,
    "user": HOST_TABLE,
    "model": MODEL,
    "model_spans": MODEL_SPANS,
    "phases": PHASES,
    "family": FAMILY,
    "overview": OVERVIEW,
    "breakdown": breakdown_rule,
    "device": "concat",
    "idle": "concat",
    "queue": "concat",
    "launches": LAUNCHES,
    "kernel": KERNEL,
    "roofline": "concat",
    "mfu": "concat",
    "memcpy": MEMCPY,
    "memory": memory_rule,
    "memory_timeline": MemoryTimelineCombiner,
    "device_timeline": "concat",
    "distributed": "concat",
    "steps": "concat",
    "benchmark": BENCHMARK,
    "ranks": "native",
    "collectives": "native",
    "layers": "concat",
    "code": "concat",
}
