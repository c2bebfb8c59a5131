"""How the PyTorch adapter maps Kineto chrome traces onto the event table
(``perfkit_torch.kineto_format``). Every example shown is run through ``classify`` while the
page is built, so a rule that stops holding fails the build."""

from __future__ import annotations

import msgspec

from gen import generator
from gen.markdown import DocsError, code, codes, table
from perfkit_core.events import schema
from perfkit_torch import kineto_format as kf

#: Columns filled from Kineto's ``args``: ``_Args`` field -> event-table column.
ARG_COLUMNS: dict[str, str] = {
    "correlation": "correlation",
    "external_id": "external_id",
    "external_id_old": "external_id",
    "sequence": "sequence",
    "input_dims": "input_shapes",
    "input_type": "input_dtypes",
    "input_values": "input_values",
    "call_stack": "stack",
    "flops": "flops",
    "device": "device_index",
    "stream": "stream",
    "nbytes": "bytes",
    "registers": "registers",
    "shared_memory": "shared_memory",
    "occupancy": "occupancy_pct",
    "grid": "grid",
    "block": "block",
    "mem_device_type": "device_type",
    "mem_device_id": "device_index",
    "mem_bytes": "bytes",
    "total_allocated": "allocated_bytes",
    "total_reserved": "reserved_bytes",
    "mem_addr": "address",
}

#: The name rules of ``classify``, in the order it applies them: (the rule, the kind it gives,
#: examples as (category, name)).
NAME_RULES: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    (
        "name is exactly `[memory]`, whatever the category (an allocation or free instant)",
        "memory",
        (("cpu_instant_event", "[memory]"),),
    ),
    (
        "an MTIA command-processor event (`mtia_ccp_events`) whose name starts with "
        + codes(kf.MTIA_COPY_PREFIXES)
        + " (a DMA copy, as HTA groups them)",
        "memcpy",
        (("mtia_ccp_events", "dma_request"),),
    ),
    (
        "an MTIA command-processor event that only orders queues: "
        + codes(kf.MTIA_QUEUE_EVENTS)
        + " (like `cuda_sync`, it keeps no engine busy)",
        "other",
        (("mtia_ccp_events", "event_wait"),),
    ),
    (
        "a device kernel whose name contains " + codes(kf.COMM_KERNEL_WORDS) + " (any case)",
        "communication",
        (
            ("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, ...)"),
            ("mtia_ccp_events", "hccl_all_reduce"),
        ),
    ),
    (
        "`ProfilerStep#N` (`N` becomes the `step` number)",
        "step",
        (("user_annotation", "ProfilerStep#5"),),
    ),
    (
        "starts with `"
        + kf.MODULE_SPAN_PREFIX
        + "` (a layer span: one `nn.Module` call, recorded by perfkit's handler, which Kineto "
        "files as `cpu_op`)",
        "user",
        (("cpu_op", "nn.Module: Linear_0"), ("user_annotation", "nn.Module: Conv2d_3")),
    ),
    (
        "starts with " + codes(kf.DATALOADER_PREFIXES),
        "dataloader",
        (
            ("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"),
            ("user_annotation", "enumerate(DataPipe)#ShufflerIterDataPipe"),
        ),
    ),
    (
        "starts with `Optimizer.step#` or `Optimizer.zero_grad#`",
        "optimizer",
        (
            ("user_annotation", "Optimizer.step#Adam.step"),
            ("user_annotation", "Optimizer.zero_grad#Adam.zero_grad"),
        ),
    ),
    (
        "starts with `autograd::engine::evaluate_function: `",
        "backward",
        (("cpu_op", "autograd::engine::evaluate_function: AddmmBackward0"),),
    ),
    (
        "starts with " + codes(kf._COMM_PREFIXES),
        "communication",
        tuple(("cpu_op", f"{p}allreduce_" if p.endswith(":") else p) for p in kf._COMM_PREFIXES),
    ),
)


def check_name_rules() -> None:
    """Raise ``DocsError`` when an example no longer classifies as the page says."""
    for _rule, kind, examples in NAME_RULES:
        for category, name in examples:
            got = kf.classify(category, name)
            if got != kind:
                raise DocsError(
                    f"classify({category!r}, {name!r}) is {got!r}, the docs say {kind!r}; "
                    "update NAME_RULES in docs/gen/torch_kineto.py and the schema page"
                )
    if kf.classify("python_function", "ProfilerStep#1") != "python":
        raise DocsError("name rules now apply beyond operator and user events; update the page")
    if kf.classify("some_new_category", "x") != "other":
        raise DocsError("unknown Kineto categories no longer become `other`; update the page")


@generator("torch.device_categories")
def device_categories() -> str:
    rows = [[code(c), code(k)] for c, k in kf.DEVICE_CATEGORIES.items()]
    return table(["Kineto category", "kind"], rows)


@generator("torch.host_categories")
def host_categories() -> str:
    rows = [[code(c), code(k)] for c, k in kf.HOST_CATEGORIES.items()]
    return table(["Kineto category", "kind"], rows)


@generator("torch.name_rules")
def name_rules() -> str:
    check_name_rules()
    rows = []
    for i, (rule, kind, examples) in enumerate(NAME_RULES, 1):
        shown = "; ".join(f"{code(name)} ({code(cat)})" for cat, name in examples)
        rows.append([str(i), rule, code(kind), shown])
    return table(["#", "rule", "kind", "examples (name, category)"], rows)


@generator("torch.memory_device_types")
def memory_device_types() -> str:
    rows = [[code(v), code(label)] for v, label in sorted(kf.MEMORY_DEVICE_TYPES.items())]
    return table(["Device Type", "device_type"], rows)


@generator("torch.args")
def args_columns() -> str:
    """The ``args`` keys each column is read from."""
    fields = {f.name: f.encode_name for f in msgspec.structs.fields(kf._Args)}
    by_column: dict[str, list[str]] = {}
    for attr, column in ARG_COLUMNS.items():
        if attr not in fields or column not in schema.COLUMN_NAMES:
            raise DocsError(f"ARG_COLUMNS entry {attr!r} in docs/gen/torch_kineto.py is stale")
        by_column.setdefault(column, []).append(code(fields[attr]))
    unread = set(fields) - set(ARG_COLUMNS) - {"meta_name"}
    if unread:
        raise DocsError(f"Kineto args {sorted(unread)} are read but not documented")
    rows = [[code(c), ", ".join(by_column[c])] for c in schema.COLUMN_NAMES if c in by_column]
    return table(["column", "Kineto args key(s)"], rows)
