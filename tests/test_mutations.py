"""Property-based: small real traces (and MindSpore profile folders), mutated by Hypothesis,
either load or fail with one ``TraceError`` line naming the file; whatever loads works in every
view, ``advise()`` and the exports, with no duration below zero.

The seeds are small real traces, made once per session: a torch CPU profile and a Paddle CPU
profile of the demo MLP (two steps each), and, from ../shared/traces, the gloo CPU rank whole
and the first 3 ms of each step of the A100 rank (kernels, NCCL, copies, flows). A mutation is
one or two edits of the parsed trace (a field set to an odd value, a field or an event dropped, an
event repeated, a top-level key set or dropped), written out as JSON (sometimes gzip), or a
byte-level edit of the file (cut short, a byte changed, bytes inserted). Paddle's protobuf
export and an XLA profile (the JAX CPU profile of tests/data/xla, an XSpace protobuf) are
mutated through their protobuf messages, or byte by byte; the Paddle export also by replacing
one byte of a string field (an extra_info key or value, an event name) with bytes that are not
UTF-8 or are control characters.

The default profile (conftest.py) tries 120 mutations of each seed, about a minute in all;
``pytest tests/test_mutations.py --hypothesis-profile=perfkit-long`` tries 3,000 of each.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note_outcome
from hypothesis import strategies as st

import perfkit_core
from perfkit_core import TraceError
from perfkit_core.advice.engine import advise
from perfkit_core.errors import printable
from perfkit_core.report.export import chrome_trace, folded_stacks
from perfkit_core.views import registered_views

ODD_NUMBERS = [
    0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1,
    2**64, 2**70, 10**30, 1e23, 1e300, -1e308, 5e-324, 0.5, -0.5,
    float("inf"), float("-inf"), float("nan"),
]  # fmt: skip
ODD_TEXT = [
    "", " ", "1.2.3 us", "ProfilerStep#99999999999999999999999", "ProfilerStep#-1",
    "<!--<script>", "a;b\nc\td", "\ud800", "\x00", "\u202e", "X", "M", "B", "E", "i", "f", "s",
]  # fmt: skip
EVENT_KEYS = ["ts", "dur", "pid", "tid", "name", "cat", "ph", "id", "args", "bp", "s"]
ARG_KEYS = [
    "External id", "correlation", "device", "stream", "Input Dims", "Input type",
    "Sequence number", "Fwd thread id", "Ev Idx", "Addr", "Bytes", "Total Allocated",
    "Total Reserved", "Device Type", "Device Id", "name", "Process Group Name",
    "In msg nelems", "Out msg nelems", "Group size", "dtype", "Collective name",
]  # fmt: skip
TOP_KEYS = [
    "traceEvents", "deviceProperties", "distributedInfo", "baseTimeNanoseconds",
    "schemaVersion", "displayTimeUnit", "traceName", "ExtraInfo", "DeviceProperties",
]  # fmt: skip

leaf = st.one_of(
    st.sampled_from(ODD_NUMBERS),
    st.integers(),
    st.floats(),
    st.sampled_from(ODD_TEXT),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
)
value = st.recursive(
    leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)


# -- the seeds -----------------------------------------------------------------------------


def _torch_seed(directory: Path) -> Path:
    pytest.importorskip("torch")
    from perfkit_torch.demo import train_mlp

    runs, _ = train_mlp(
        directory, steps=2, blocks=1, width=8, batch_size=4, keep_trace=True, background=False
    )
    return next(runs[0].glob("*.pt.trace.json"))


def _paddle_seed(directory: Path) -> Path:
    pytest.importorskip("paddle")
    from perfkit_paddle.demo import train_mlp

    export = directory / "seed.paddle_trace.json"

    def export_json(prof: Any) -> None:
        prof.profiler_result.save(str(export), "json")

    train_mlp(directory / "runs", steps=2, blocks=1, width=8, batch_size=4, chain=[export_json])
    return export


def _a100_window(directory: Path, window_us: float = 3000.0) -> Path:
    """The real A100 rank cut to the first ``window_us`` of each step (each step's span cut to
    match), metadata kept."""
    from conftest import shared_trace

    with gzip.open(shared_trace("a100_rank3"), "rb") as file:
        doc = json.load(file)
    steps = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")]
    windows = [(float(s["ts"]), float(s["ts"]) + window_us) for s in steps]
    kept = []
    for event in doc["traceEvents"]:
        if event.get("ph") == "M":
            kept.append(event)
            continue
        ts = float(event.get("ts", -1))
        if any(start <= ts < end for start, end in windows):
            if event in steps:
                event = {**event, "dur": window_us}
            kept.append(event)
    doc["traceEvents"] = kept
    path = directory / "a100_window.json"
    path.write_text(json.dumps(doc))
    return path


def _gloo(directory: Path) -> Path:
    from conftest import shared_trace

    return shared_trace("gloo_rank34")


SEEDS = {"torch": _torch_seed, "paddle": _paddle_seed, "a100": _a100_window, "gloo": _gloo}


@pytest.fixture(scope="module", params=sorted(SEEDS))
def seed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(name, raw bytes, parsed document, file suffix) of one seed trace."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = SEEDS[request.param](tmp_path_factory.mktemp(f"seed_{request.param}"))
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    suffix = ".pt.trace.json" if request.param != "paddle" else ".paddle_trace.json"
    return request.param, raw, json.loads(raw), suffix


# -- mutations -----------------------------------------------------------------------------


def _events(doc: Any) -> list[Any]:
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return doc["traceEvents"]
    return doc if isinstance(doc, list) else []


def _key(pick: random.Random, present: Any, known: list[str]) -> str:
    """A key the event has (most often: those are the ones a reader looks at), or a known one."""
    keys = sorted(k for k in present if isinstance(k, str))
    if keys and pick.random() < 0.75:
        return pick.choice(keys)
    return pick.choice(known)


def _edit(data: st.DataObject, doc: Any) -> None:
    """One structural edit of ``doc`` in place. Which event and key are picked uniformly (by a
    random generator Hypothesis seeds): its own draws favour the first and last ones."""
    pick = data.draw(st.randoms(use_true_random=False))
    events = _events(doc)
    kind = data.draw(
        st.sampled_from(["set", "set", "set_arg", "set_arg", "drop", "drop_event", "repeat", "top"])
    )
    if kind == "top" or not events:
        if isinstance(doc, dict):
            key = _key(pick, doc, TOP_KEYS)
            if data.draw(st.booleans()):
                doc.pop(key, None)
            else:
                doc[key] = data.draw(value)
        return
    index = pick.randrange(len(events))
    if kind == "set_arg":  # an event that has args, when one does
        with_args = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("args")]
        index = pick.choice(with_args) if with_args else index
    event = events[index]
    if kind == "drop_event":
        del events[index]
    elif kind == "repeat":
        events.insert(index, copy.deepcopy(event))
    elif not isinstance(event, dict):
        events[index] = data.draw(value)
    elif kind == "drop":
        if event:
            event.pop(_key(pick, event, EVENT_KEYS), None)
    elif kind == "set_arg" and isinstance(event.get("args"), dict):
        event["args"][_key(pick, event["args"], ARG_KEYS)] = data.draw(value)
    else:
        event[_key(pick, event, EVENT_KEYS)] = data.draw(value)


def _byte_edit(data: st.DataObject, raw: bytes) -> bytes:
    """The file cut short, one byte changed, or bytes inserted."""
    position = data.draw(st.integers(0, len(raw)))
    action = data.draw(st.sampled_from(["cut", "byte", "insert"]))
    if action == "cut":
        return raw[:position]
    inserted = data.draw(st.binary(min_size=1, max_size=4))
    if action == "byte":
        return raw[:position] + inserted[:1] + raw[position + 1 :]
    return raw[:position] + inserted + raw[position:]


def _mutated_bytes(data: st.DataObject, raw: bytes, doc: Any) -> bytes:
    if data.draw(st.integers(0, 5)) == 0:  # byte level, one time in six
        return _byte_edit(data, raw)
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 2))):
        _edit(data, doc)
    return json.dumps(doc).encode()  # NaN and Infinity written as JSON's non-standard tokens


# -- the property --------------------------------------------------------------------------


def _check(path: Path) -> str:
    """Load ``path`` and use whatever loads; return what happened."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run = perfkit_core.load(path)
    except TraceError as error:
        message = str(error)
        assert message.isprintable(), message
        assert printable(str(path)) in message, message
        return "refused with TraceError"
    events = run.events
    assert (events["dur_ns"] >= 0).all(), "a duration below zero"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for view in registered_views():
            run.summary(view)
        advise(run)
        chrome_trace(run)
        folded_stacks(run)
    return "loaded"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_trace_loads_or_fails_with_one_line(seed, tmp_path, data):
    name, raw, doc, suffix = seed
    payload = _mutated_bytes(data, raw, doc)
    packed = data.draw(st.booleans())
    path = tmp_path / f"{name}{suffix}{'.gz' if packed else ''}"
    path.write_bytes(gzip.compress(payload, compresslevel=1) if packed else payload)
    note_outcome(_check(path))


def test_seeds_load_and_pass_the_checks(seed, tmp_path):
    name, raw, _doc, suffix = seed
    path = tmp_path / f"{name}{suffix}"
    path.write_bytes(raw)
    run = perfkit_core.load(path)
    assert len(run.events) > 10
    assert _check(path) == "loaded"


# -- Paddle's protobuf export ----------------------------------------------------------------

PB_NUMBERS = [0, 1, 2**31, 2**32 - 1, 2**62, 2**62 + 1, 2**63 - 1, 2**63, 2**64 - 1]
PB_TEXT = ["", "ProfileStep#99999999999999999999999", "ProfileStep#-1", "<!--<script>", "a;b\nc"]
#: Bytes put into a string field of the export in place of one of its bytes: not UTF-8 (a lone
#: continuation byte, a lead byte without its continuation, bytes UTF-8 never uses, the start of
#: an encoded surrogate) or control characters.
PB_ODD_BYTES = [b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xed", b"\xc0", b"\x00", b"\x1b", b"\r"]


@pytest.fixture(scope="module")
def pb_seed(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The protobuf export of a small real Paddle CPU profile (what the handler writes)."""
    pytest.importorskip("paddle")
    from perfkit_paddle.demo import train_mlp

    directory = tmp_path_factory.mktemp("seed_pb")
    export = directory / "seed.paddle_trace.pb"

    def export_pb(prof: Any) -> None:
        prof.profiler_result.save(str(export), "pb")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        train_mlp(directory / "runs", steps=2, blocks=1, width=8, batch_size=4, chain=[export_pb])
    return export.read_bytes()


def _pb_strings(message: Any) -> list[str]:
    """The string fields of an export that Paddle fills from the run: extra_info keys and values
    (thread names, CPU utilization), host event names, the version."""
    found = [message.version]
    for entry in message.extra_info:
        found += [entry.key, entry.value]
    for tree in message.thread_trees:
        found += [node.host_trace_event.name for node in tree.host_nodes]
    return [text for text in found if text]


def _odd_text_bytes(raw: bytes, text: str, offset: int, odd: bytes) -> bytes:
    """``raw`` with one byte of the string field ``text`` (its first occurrence) replaced by
    ``odd``: the field keeps its length, so the message still decodes."""
    encoded = text.encode()
    at = raw.index(encoded) + offset % len(encoded)
    return raw[:at] + odd + raw[at + 1 :]


def _mutated_pb(data: st.DataObject, raw: bytes) -> bytes:
    """One or two edits of the decoded export (a host event's number or name set to an odd
    value, a parent link or event type changed, a node dropped or repeated, a thread's tree
    repeated), a byte of a string field (an extra_info key or value, an event name) replaced by
    an odd byte, or a byte-level edit of the file."""
    from perfkit_paddle.pb_schema import node_trees_class

    choice = data.draw(st.integers(0, 5))
    if choice == 0:  # byte level, one time in six
        return _byte_edit(data, raw)
    message = node_trees_class()()
    message.ParseFromString(raw)
    if choice == 1:  # a string field's byte, one time in six
        texts = _pb_strings(message)
        text = texts[data.draw(st.integers(0, len(texts) - 1))]
        odd = data.draw(st.sampled_from(PB_ODD_BYTES))
        return _odd_text_bytes(raw, text, data.draw(st.integers(0, 200)), odd)
    pick = data.draw(st.randoms(use_true_random=False))
    for _ in range(data.draw(st.integers(1, 2))):
        tree = pick.choice(list(message.thread_trees))
        index = pick.randrange(len(tree.host_nodes))
        node = tree.host_nodes[index]
        event = node.host_trace_event
        kind = data.draw(
            st.sampled_from(
                ["number", "number", "name", "parent", "type", "drop", "repeat", "tree"]
            )
        )
        if kind == "number":
            field = pick.choice(["start_ns", "end_ns", "process_id", "thread_id"])
            setattr(event, field, data.draw(st.sampled_from(PB_NUMBERS)))
        elif kind == "name":
            event.name = data.draw(st.sampled_from(PB_TEXT))
        elif kind == "parent":
            node.parentid = data.draw(st.sampled_from([-1, 0, index, index + 1, 2**40, -5]))
        elif kind == "type":
            event.type = data.draw(st.sampled_from([0, 2, 4, 15, 16, 17, 2**32 - 1]))
        elif kind == "drop":
            del tree.host_nodes[index]
        elif kind == "repeat":
            tree.host_nodes.add().CopyFrom(node)
        else:
            message.thread_trees.add().CopyFrom(tree)
    return message.SerializeToString()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_pb_export_loads_or_fails_with_one_line(pb_seed, tmp_path, data):
    path = tmp_path / "mutated.paddle_trace.pb"
    path.write_bytes(_mutated_pb(data, pb_seed))
    note_outcome(_check(path))


def test_pb_seed_loads_and_passes_the_checks(pb_seed, tmp_path):
    path = tmp_path / "seed.paddle_trace.pb"
    path.write_bytes(pb_seed)
    assert len(perfkit_core.load(path).events) > 10
    assert _check(path) == "loaded"


@pytest.mark.parametrize("odd", PB_ODD_BYTES)
def test_pb_extra_info_keys_with_odd_bytes_load_or_fail_with_one_line(pb_seed, tmp_path, odd):
    """Every extra_info key and value of the real export with its first byte replaced: text that
    is not UTF-8 (which protobuf hands over as bytes, and which ended in a TypeError traceback)
    is refused in one line naming the field; control characters load."""
    from perfkit_paddle.pb_schema import node_trees_class

    message = node_trees_class()()
    message.ParseFromString(pb_seed)
    entries = [(e.key, e.value) for e in message.extra_info]
    assert entries
    outcomes = set()
    for key, value in entries:
        for text, field in ((key, "key"), (value, "value")):
            path = tmp_path / "odd.paddle_trace.pb"
            path.write_bytes(_odd_text_bytes(pb_seed, text, 0, odd))
            outcome = _check(path)
            outcomes.add(outcome)
            if outcome != "loaded":
                with pytest.raises(TraceError, match=f"an extra_info {field} is not UTF-8 text"):
                    perfkit_core.load(path)
    valid = True
    try:
        odd.decode()
    except UnicodeDecodeError:
        valid = False
    assert outcomes == ({"loaded"} if valid else {"refused with TraceError"}), outcomes


# -- XLA's XSpace (TensorFlow and JAX profiles, *.xplane.pb) ---------------------------------

XLA_PROFILE = Path(__file__).parent / "data" / "xla" / "jax_mlp" / "plugins" / "profile" / "run"
#: Stats the XLA loader reads, and one it does not.
XLA_STATS = [
    "step_num", "correlation_id", "flops", "bytes_transferred", "hlo_op", "hlo_module",
    "program_id", "tf_op", "perfkit", "input_shapes", "_c",
]  # fmt: skip
XLA_NAMES = [
    "train", "dot.1", "$x.py:1 f", "PjitFunction(f)", "Iterator::Map", "a/b:MatMul",
    "all-reduce.1", "MemcpyHtoD", "end: x", "",
]  # fmt: skip
XLA_PLANES = ["/host:CPU", "/device:GPU:0", "/device:TPU:1", "/host:metadata", "Task Environment"]
XLA_LINES = ["python", "Stream #1", "XLA Ops", "XLA Modules", "tf_data_x", ""]


def _pb_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _pb_field(number: int, wire: int, payload: bytes) -> bytes:
    if wire == 2:
        payload = _pb_varint(len(payload)) + payload
    return _pb_varint(number << 3 | wire) + payload


@pytest.fixture(scope="module")
def xplane_seed() -> bytes:
    """The real JAX CPU profile of tests/data/xla (no jax needed to read it), each line cut to
    its first 120 events: the same planes, metadata and HLO protos, a quicker load."""
    pytest.importorskip("perfkit_xla")
    from perfkit_xla.protos import message_class

    space = message_class("XSpace")()
    space.ParseFromString((XLA_PROFILE / "mlp.xplane.pb").read_bytes())
    for plane in space.planes:
        for line in plane.lines:
            del line.events[120:]
    return space.SerializeToString()


def _stat_payload(data: st.DataObject, ids: list[int]) -> bytes:
    """An XStat of one of ``ids`` with an odd value of any kind."""
    import struct

    value = data.draw(
        st.one_of(
            st.sampled_from(PB_NUMBERS).map(lambda v: _pb_field(3, 0, _pb_varint(v))),
            st.sampled_from([-1, -(2**63), 2**63 - 1]).map(
                lambda v: _pb_field(4, 0, _pb_varint(v))
            ),
            st.sampled_from(ODD_NUMBERS).map(
                lambda v: _pb_field(2, 1, struct.pack("<d", float(v)))
            ),
            st.sampled_from([*PB_TEXT, "user", "12", "[[3]]"]).map(
                lambda t: _pb_field(5, 2, t.encode())
            ),
            st.binary(max_size=6).map(lambda b: _pb_field(6, 2, b)),
            st.sampled_from([*ids, 0, 2**40]).map(lambda v: _pb_field(7, 0, _pb_varint(v))),
        )
    )
    return _pb_field(1, 0, _pb_varint(data.draw(st.sampled_from([*ids, 0, 999])))) + value


def _mutated_xplane(data: st.DataObject, raw: bytes) -> bytes:
    """One or two edits of the profile (an event's metadata id, offset or duration set to an
    odd value, an odd stat added, an event made an aggregate, dropped or repeated, a line's
    timestamp, id or name, a plane's name, an event name, an HLO proto cut short), or a
    byte-level edit of the file. Fields are edited by appending them: the last one counts."""
    from perfkit_xla.protos import message_class

    if data.draw(st.integers(0, 3)) == 0:  # byte level, one time in four
        return _byte_edit(data, raw)
    space = message_class("XSpace")()
    space.ParseFromString(raw)
    pick = data.draw(st.randoms(use_true_random=False))
    for _ in range(data.draw(st.integers(1, 2))):
        plane = pick.choice(list(space.planes))
        ids = [e.key for e in plane.stat_metadata if e.value.name.decode() in XLA_STATS]
        lines = [line for line in plane.lines if len(line.events)]
        kind = data.draw(
            st.sampled_from(
                ["event", "event", "stat", "stat", "drop", "repeat", "line", "plane", "name", "hlo"]
            )
        )
        if kind in ("event", "stat", "drop", "repeat") and lines:
            line = pick.choice(lines)
            index = pick.randrange(len(line.events))
            if kind == "event":
                number = data.draw(st.sampled_from([1, 2, 3, 5]))
                value = data.draw(st.sampled_from(PB_NUMBERS))
                line.events[index] += _pb_field(number, 0, _pb_varint(value))
            elif kind == "stat":
                if not ids or data.draw(st.booleans()):  # a stat name the plane did not have
                    name = data.draw(st.sampled_from(XLA_STATS))
                    new_id = 5000 + len(plane.stat_metadata)
                    entry = plane.stat_metadata.add(key=new_id)
                    entry.value.id, entry.value.name = new_id, name.encode()
                    ids.append(new_id)
                line.events[index] += _pb_field(4, 2, _stat_payload(data, ids))
            elif kind == "drop":
                del line.events[index]
            else:
                line.events.append(line.events[index])
        elif kind == "line" and plane.lines:
            line = pick.choice(list(plane.lines))
            what = data.draw(st.sampled_from(["timestamp_ns", "id", "name"]))
            if what == "name":
                line.name = data.draw(st.sampled_from(XLA_LINES)).encode()
            else:
                value = data.draw(st.sampled_from([*PB_NUMBERS, -1, -(2**63)]))
                setattr(line, what, value - 2**64 if value >= 2**63 else value)
        elif kind == "plane":
            plane.name = data.draw(st.sampled_from(XLA_PLANES)).encode()
        elif kind == "name" and len(plane.event_metadata):
            entry = pick.choice(list(plane.event_metadata))
            entry.value.name = data.draw(st.sampled_from(XLA_NAMES)).encode()
        elif kind == "hlo":
            protos = [
                s for e in plane.event_metadata for s in e.value.stats if s.HasField("bytes_value")
            ]
            if protos:
                proto = pick.choice(protos)
                proto.bytes_value = _byte_edit(data, proto.bytes_value)
    return space.SerializeToString()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_xplane_loads_or_fails_with_one_line(xplane_seed, tmp_path, data):
    path = tmp_path / "mutated.xplane.pb"
    path.write_bytes(_mutated_xplane(data, xplane_seed))
    note_outcome(_check(path))


def test_xplane_seed_loads_and_passes_the_checks(xplane_seed, tmp_path):
    path = tmp_path / "seed.xplane.pb"
    path.write_bytes(xplane_seed)
    assert len(perfkit_core.load(path).events) > 10
    assert _check(path) == "loaded"


# -- MindSpore's profile folders -------------------------------------------------------------

#: Real MindSpore profiles (tests/data/mindspore): a PyNative one from MindSpore's own handler,
#: and a graph-mode one with cell scopes and perfkit's spans file.
MINDSPORE = Path(__file__).resolve().parent / "data" / "mindspore"
MINDSPORE_SEEDS = {
    "pynative": next((MINDSPORE / "pynative_mlp").glob("*_ascend_ms")),
    "graph": next((MINDSPORE / "graph_cnn").glob("*_ascend_ms")),
}
#: Files of a profile a mutation edits: the timeline (as JSON), or a table (byte edits).
MINDSPORE_FILES = [
    "ASCEND_PROFILER_OUTPUT/trace_view.json",
    "FRAMEWORK/cpu_op_type_info_0.csv",
    "FRAMEWORK/cpu_op_detail_info_0.csv",
    "FRAMEWORK/cpu_op_execute_timestamp_0.txt",
    "FRAMEWORK/cpu_framework_0.txt",
]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.parametrize("seed_name", sorted(MINDSPORE_SEEDS))
def test_mutated_mindspore_folder_loads_or_fails_with_one_line(seed_name, tmp_path, data):
    import shutil
    import uuid

    folder = tmp_path / uuid.uuid4().hex / MINDSPORE_SEEDS[seed_name].name
    shutil.copytree(MINDSPORE_SEEDS[seed_name], folder)
    # Without the timeline (sometimes), the timestamps file is read instead.
    if seed_name == "pynative" and data.draw(st.booleans()):
        (folder / MINDSPORE_FILES[0]).unlink()
    present = [f for f in MINDSPORE_FILES if (folder / f).exists()]
    target = folder / data.draw(st.sampled_from(present))
    raw = target.read_bytes()
    if target.suffix == ".json":
        payload = _mutated_bytes(data, raw, json.loads(raw))
    else:
        payload = _byte_edit(data, raw)
    target.write_bytes(payload)
    note_outcome(_check(folder))
