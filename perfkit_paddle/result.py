"""Convert Paddle's ``ProfilerResult`` (``prof.profiler_result``) straight into a perfkit ``Run``.

``get_data()`` gives one root ``HostPythonNode`` per thread; host nodes hold ``children_node``,
``runtime_node`` (runtime calls, themselves host nodes holding the ``device_node`` they
launched), ``device_node`` and ``mem_node``. One iterative walk collects every node into
columns; no JSON is written or read. paddle is never imported here: the nodes come from the
caller.

Device work is tied to what issued it by the tree first, as Paddle's own statistics do: the
device nodes a runtime node holds share that runtime call's ``correlation`` (Paddle's
correlation id where the call and all its device nodes carry the same non-zero id that no other
runtime node carries, else an id perfkit gives, above every id Paddle wrote), and device nodes
a host node holds directly share its ``external_id`` (their Paddle id is kept where no runtime
node carries it). Paddle's correlation ids are the link only for device nodes the tree places
nowhere, and an id of 0 links nothing.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from perfkit_paddle.columns import Columns, columns_to_events, compact_json, extra_info_meta
from perfkit_paddle.kinds import ALLOCATION_TYPES, parse_place

if TYPE_CHECKING:
    from perfkit_core.events import Run


_NAN = float("nan")


def _text(value: Any) -> str:
    return (
        compact_json(value)
        if isinstance(value, (dict, list, tuple))
        else (str(value) if value else "")
    )


def _type_name(value: Any, cache: dict[Any, str]) -> str:
    name = cache.get(value)
    if name is None:
        name = getattr(value, "name", None) or str(value).rsplit(".", 1)[-1]
        cache[value] = name
    return name


def walk(trees: dict[Any, Any]) -> Columns:
    """Collect every node of ``trees`` (``ProfilerResult.get_data()``) into columns.

    Host, device and memory nodes are gathered as tuples of only the fields that vary for their
    kind (one append per node), then transposed into columns.
    """
    types: dict[Any, str] = {}
    host: list[tuple[Any, ...]] = []
    device: list[tuple[Any, ...]] = []
    memory: list[tuple[Any, ...]] = []
    add_host, add_device, add_memory = host.append, device.append, memory.append
    # Tree links: link k (from 1) is a runtime node and the device nodes it holds, or a host
    # node and the device nodes it holds directly. ``native[k]`` is the correlation id to keep
    # for a runtime link (0: give one).
    native: list[int] = [0]
    runtime_ids: list[int] = []
    for root in trees.values():
        # The root of each thread is a placeholder spanning all time; its children are real,
        # and every node of one tree ran on the same process and thread.
        stack = list(root.children_node)
        if not stack:
            for m in root.mem_node:
                add_memory(_memory_tuple(m, types))
            continue
        pid, tid = stack[0].process_id, stack[0].thread_id  # the placeholder root holds zeros
        for m in root.mem_node:
            add_memory(_memory_tuple(m, types))
        while stack:
            node = stack.pop()
            node_type = node.type
            type_name = types.get(node_type) or _type_name(node_type, types)
            direct = node.device_node
            own = 0
            if direct:
                own = len(native)
                native.append(0)
            if type_name == "Operator":
                # Only operators carry shapes, dtypes and a call stack.
                add_host(
                    (
                        type_name,
                        node.name,
                        node.start_ns,
                        node.end_ns,
                        pid,
                        tid,
                        -1,
                        own,
                        node.input_shapes,
                        node.dtypes,
                        node.callstack,
                    )
                )
            else:
                add_host(
                    (
                        type_name,
                        node.name,
                        node.start_ns,
                        node.end_ns,
                        pid,
                        tid,
                        -1,
                        own,
                        None,
                        None,
                        None,
                    )
                )
            stack.extend(node.children_node)
            for rt in node.runtime_node:
                devices = rt.device_node
                corr = rt.correlation_id or 0
                link = 0
                if devices:
                    link = len(native)
                    same = corr > 0 and all(d.correlation_id == corr for d in devices)
                    native.append(corr if same else 0)
                runtime_ids.append(corr)
                add_host(
                    (
                        _type_name(rt.type, types),
                        rt.name,
                        rt.start_ns,
                        rt.end_ns,
                        rt.process_id,
                        rt.thread_id,
                        corr,
                        -link,
                        None,
                        None,
                        None,
                    )
                )
                for dev in devices:
                    add_device(_device_tuple(dev, types, -link))
            for dev in direct:
                add_device(_device_tuple(dev, types, own))
            for m in node.mem_node:
                add_memory(_memory_tuple(m, types))
    return _assemble(host, device, memory, types, native, runtime_ids)


def _device_tuple(dev: Any, types: dict[Any, str], link: int = 0) -> tuple[Any, ...]:
    """The fields of device node ``dev``; ``link``: its tree link (> 0: the host node that
    holds it, < 0: the runtime node that holds it, 0: none)."""
    type_name = _type_name(dev.type, types)
    is_kernel = type_name == "Kernel"
    return (
        type_name,
        dev.name,
        dev.start_ns,
        dev.end_ns,
        dev.stream_id,
        dev.device_id,
        dev.correlation_id,
        link,
        float(dev.num_bytes) if type_name in ("Memcpy", "Memset") else _NAN,
        f"{dev.grid_x},{dev.grid_y},{dev.grid_z}" if is_kernel else "",
        f"{dev.block_x},{dev.block_y},{dev.block_z}" if is_kernel else "",
        float(dev.registers_per_thread) if is_kernel else _NAN,
        float(dev.shared_memory) if is_kernel else _NAN,
        float(dev.occupancy) * 100.0 if is_kernel else _NAN,
    )


def _memory_tuple(m: Any, types: dict[Any, str]) -> tuple[Any, ...]:
    device_type, device_index = parse_place(str(m.place))
    type_name = _type_name(m.type, types)
    return (
        type_name,
        m.timestamp_ns,
        m.process_id,
        m.thread_id,
        device_type,
        device_index,
        # Reserved-pool events change only the allocator's totals: no bytes allocated or freed.
        float(m.increase_bytes) if type_name in ALLOCATION_TYPES else _NAN,
        m.addr,
        float(m.current_allocated),
        float(m.current_reserved),
    )


def _assemble(
    host: list[tuple[Any, ...]],
    device: list[tuple[Any, ...]],
    memory: list[tuple[Any, ...]],
    types: dict[Any, str],
    native: list[int] | None = None,
    runtime_ids: list[int] | None = None,
) -> Columns:
    from collections import Counter

    c = Columns()
    nh, nd, nm = len(host), len(device), len(memory)
    native = native or [0]
    on_runtime = Counter(runtime_ids or [])
    # The correlation of each runtime link: Paddle's where it ties the call, and only it, to
    # its device nodes; else a new id above every id Paddle wrote (so none is shared).
    top = max([0, *native, *(t[6] or 0 for t in host), *(t[6] or 0 for t in device)])
    link_corr = [
        corr if corr > 0 and on_runtime[corr] == 1 else top + k for k, corr in enumerate(native)
    ]
    if nh:
        (
            h_type,
            h_name,
            h_start,
            h_end,
            h_pid,
            h_tid,
            h_corr,
            h_link,
            h_shapes,
            h_dtypes,
            h_stack,
        ) = zip(*host, strict=True)
        c.type = list(h_type)
        c.name = list(h_name)
        c.start = list(h_start)
        c.end = list(h_end)
        c.pid = list(h_pid)
        c.tid = list(h_tid)
        c.correlation = [
            link_corr[-k] if k < 0 else (x if x else -1)
            for x, k in zip(h_corr, h_link, strict=True)
        ]
        c.external_id = [k if k > 0 else -1 for k in h_link]
        c.shapes = [_text(x) if x else "" for x in h_shapes]
        c.dtypes = [_text(x) if x else "" for x in h_dtypes]
        c.stack = [x or "" for x in h_stack]
    c.stream = [-1] * nh
    c.device_index = [-1] * nh
    c.device_type = ["cpu"] * nh
    for col in (c.nbytes, c.allocated, c.reserved, c.registers, c.shared_memory, c.occupancy):
        col.extend([_NAN] * nh)
    c.grid = [""] * nh
    c.block = [""] * nh
    for (
        type_name,
        name,
        start,
        end,
        stream,
        device_id,
        corr,
        link,
        nbytes,
        grid,
        block,
        regs,
        shm,
        occ,
    ) in device:
        c.type.append(type_name)
        c.name.append(name)
        c.start.append(start)
        c.end.append(end)
        c.pid.append(-1)
        c.tid.append(-1)
        c.stream.append(stream)
        c.device_index.append(device_id)
        c.device_type.append("gpu")
        if link < 0:
            corr = link_corr[-link]
        elif not corr or (link > 0 and on_runtime[corr]):
            corr = -1  # held by a host node: its id must not tie it to a runtime call
        c.correlation.append(corr)
        c.external_id.append(link if link > 0 else -1)
        c.shapes.append("")
        c.dtypes.append("")
        c.stack.append("")
        c.nbytes.append(nbytes)
        c.allocated.append(_NAN)
        c.reserved.append(_NAN)
        c.grid.append(grid)
        c.block.append(block)
        c.registers.append(regs)
        c.shared_memory.append(shm)
        c.occupancy.append(occ)
    for row, (
        type_name,
        ts,
        pid,
        tid,
        device_type,
        device_index,
        inc,
        addr,
        cur_alloc,
        cur_res,
    ) in enumerate(memory, nh + nd):
        c.address_rows.append(row)
        c.address.append(addr)
        c.type.append(type_name)
        c.name.append("[memory]")
        c.start.append(ts)
        c.end.append(ts)
        c.pid.append(pid)
        c.tid.append(tid)
        c.stream.append(-1)
        c.device_index.append(device_index)
        c.device_type.append(device_type)
        c.correlation.append(-1)
        c.external_id.append(-1)
        c.shapes.append("")
        c.dtypes.append("")
        c.stack.append("")
        c.nbytes.append(inc)
        c.allocated.append(cur_alloc)
        c.reserved.append(cur_res)
        c.grid.append("")
        c.block.append("")
        c.registers.append(_NAN)
        c.shared_memory.append(_NAN)
        c.occupancy.append(_NAN)
    assert len(c.name) == nh + nd + nm
    return c


def run_from_result(
    result: Any,
    *,
    source: str | None = None,
    extra_meta: dict[str, Any] | None = None,
    rank: int = 0,
    world_size: int = 1,
) -> Run:
    """Return the ``Run`` held by a Paddle ``ProfilerResult`` (``prof.profiler_result``).

    Raises ``ValueError`` when the result holds no events.
    """
    from perfkit_core.events import finish_events, make_run

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        cols = walk(result.get_data())
        n = len(cols)
        if n == 0:
            raise ValueError("the profile holds no events")
        if "ProfileStep" not in cols.type:
            raise ValueError(
                "no ProfileStep events: the profiler recorded no step (call prof.step() in the training loop)"
            )
        events = finish_events(columns_to_events(cols, rank=rank), n)
    finally:
        if was_enabled:
            gc.enable()
    info = extra_info_meta(_call(result, "get_extra_info") or {})
    meta: dict[str, Any] = {
        "framework": "paddle",
        "framework_version": None,
        "host": None,
        "devices": [],
        "rank": rank,
        "world_size": world_size,
        "source": source,
        "accounting": {"events_in_profile": n, "rows": n},
        "threads": info["threads"],
        "extra": {
            "cpu_utilization": info["cpu_utilization"],
            "span_index": _call(result, "get_span_index"),
            "profiler_result_version": _call(result, "get_version"),
        },
    }
    if extra_meta:
        extra = dict(extra_meta)
        meta["extra"].update(extra.pop("extra", None) or {})
        meta.update(extra)
    return make_run(events, meta)


def _call(obj: Any, method: str) -> Any:
    try:
        return getattr(obj, method)()
    except Exception:
        return None
