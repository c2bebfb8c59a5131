"""The TensorFlow/JAX adapter (perfkit-xla): the XSpace decoder, the mapping onto the event table,
agreement with the profiler's own trace viewer data, log folders, the CLI, comparison with a
torch run of the same MLP, and ``perfkit_xla.profile`` on a real JAX run.

The fixture in tests/data/xla/jax_mlp is a real JAX profile (tests/data/xla/generate.py): the
tests that read it need no jax. Tests that profile need jax and skip without it.
"""

from __future__ import annotations

import collections
import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import perfkit_core
from perfkit_core import TraceError

REPO = Path(__file__).resolve().parents[1]
LOG_DIR = REPO / "tests" / "data" / "xla" / "jax_mlp"
PROFILE = LOG_DIR / "plugins" / "profile" / "run"
XPLANE = PROFILE / "mlp.xplane.pb"
VIEWER = PROFILE / "mlp.trace.json.gz"
#: A real TensorFlow profile of the same MLP in Keras (tests/data/xla/generate_tf.py).
TF_LOG_DIR = REPO / "tests" / "data" / "xla" / "tf_mlp"
HAS_JAX = importlib.util.find_spec("jax") is not None
HAS_TF = importlib.util.find_spec("tensorflow") is not None
#: Set in tox's ``xla`` environment, which installs both frameworks: there a missing framework
#: fails the tests that need it instead of skipping them.
REQUIRE_FRAMEWORKS = os.environ.get("PERFKIT_REQUIRE_XLA_FRAMEWORKS") == "1"
if REQUIRE_FRAMEWORKS and not (HAS_JAX and HAS_TF):
    raise RuntimeError("PERFKIT_REQUIRE_XLA_FRAMEWORKS=1 but jax or tensorflow is not installed")
needs_jax = pytest.mark.skipif(not HAS_JAX, reason="jax is not installed")
needs_tf = pytest.mark.skipif(not HAS_TF, reason="tensorflow is not installed")


def viewer_events(path: Path) -> list[dict]:
    """The complete events ("ph": "X") of the trace viewer JSON the profiler wrote."""
    with gzip.open(path) as fh:
        data = json.load(fh)
    return [e for e in data["traceEvents"] if e.get("ph") == "X"]


def viewer_totals(events: list[dict]) -> tuple[collections.Counter, collections.Counter]:
    """Calls and total time (ns) per event name, as the trace viewer holds them."""
    calls: collections.Counter = collections.Counter()
    total: collections.Counter = collections.Counter()
    for e in events:
        calls[e["name"]] += 1
        total[e["name"]] += e["dur"] * 1000.0
    return calls, total


@pytest.fixture(scope="module")
def run():
    return perfkit_core.load(LOG_DIR)


# --- the decoder --------------------------------------------------------------------------


def test_decoder_reads_the_planes_jax_wrote():
    from perfkit_xla.xspace import decode_xspace

    space = decode_xspace(XPLANE.read_bytes())
    names = [p.name for p in space.planes]
    assert "/host:CPU" in names and "Task Environment" in names
    host = next(p for p in space.planes if p.name == "/host:CPU")
    assert {line.name for line in host.lines} >= {"python"}
    stats = host.named_stats(host.stats)
    assert int(stats["process_id"]) > 0
    n_events = sum(len(line.metadata_id) for line in host.lines)
    assert n_events == len(viewer_events(VIEWER))


# A protobuf encoder of a few lines, to write XSpaces by hand.


def varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(number: int, payload: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def vfield(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def test_decoder_reads_varints_and_values_by_the_wire_format():
    import struct

    from perfkit_xla.xspace import decode_xspace

    stat_meta = field(5, vfield(1, 7) + field(2, vfield(1, 7) + field(2, b"flops")))
    event_meta = field(4, vfield(1, 3) + field(2, vfield(1, 3) + field(2, b"dot.1")))
    stat = vfield(1, 7) + varint(2 << 3 | 1) + struct.pack("<d", 2.5e9)
    event = vfield(1, 3) + vfield(2, 1_500_000) + vfield(3, 2_499) + field(4, stat)
    line = vfield(1, 42) + field(2, b"Stream #1") + vfield(3, -5) + field(4, event)
    plane = vfield(1, 1) + field(2, b"/device:GPU:0") + field(3, line) + event_meta + stat_meta
    space = decode_xspace(field(1, plane) + field(4, b"host0") + b"\x38\x01")  # unknown field 7
    (p,) = space.planes
    (ln,) = p.lines
    assert (ln.id, ln.name, ln.timestamp_ns) == (42, "Stream #1", -5)
    columns = (ln.metadata_id.tolist(), ln.offset_ps.tolist(), ln.event_duration_ps.tolist())
    assert columns == ([3], [1_500_000], [2_499])
    assert p.named_stats(space.events.stats.of_event(ln.first)) == {"flops": 2.5e9}
    assert p.event_metadata[3].name == "dot.1" and space.hostnames == ["host0"]


def test_wire_reads_varints_of_every_length():
    import numpy as np

    from perfkit_xla.wire import Buffer, varints

    values = [0, 1, 127, *(2 ** (7 * k) + d for k in range(1, 10) for d in (-1, 0)), 2**64 - 1]
    encoded = [varint(v) for v in values]
    assert sorted({len(e) for e in encoded}) == list(range(1, 11))
    buf = Buffer(b"".join(encoded))
    starts = np.cumsum([0] + [len(e) for e in encoded[:-1]])
    read, after = varints(buf, starts)
    assert read.tolist() == values
    assert after.tolist() == (starts + [len(e) for e in encoded]).tolist()


def test_stats_the_loader_does_not_read_are_not_parsed(tmp_path):
    """A damaged stat the loader reads makes the file unreadable (one line); a damaged stat it
    has no use for is left unparsed, as protobuf leaves a lazy field."""
    stat_meta = b"".join(
        field(5, vfield(1, k) + field(2, vfield(1, k) + field(2, name)))
        for k, name in ((1, b"correlation_id"), (2, b"_c"))
    )
    event_meta = field(4, vfield(1, 3) + field(2, vfield(1, 3) + field(2, b"op")))

    def profile(stat: bytes) -> Path:
        event = vfield(1, 3) + vfield(2, 1_000) + vfield(3, 2_000) + field(4, stat)
        line = vfield(1, 1) + field(2, b"t") + field(4, event)
        path = tmp_path / "p.xplane.pb"
        path.write_bytes(field(1, field(2, b"/host:CPU") + field(3, line) + event_meta + stat_meta))
        return path

    damaged = b"\x18\xff"  # a uint64 value whose varint runs past the stat's end
    assert perfkit_core.load(profile(vfield(1, 1) + vfield(3, 42))).events["correlation"][0] == 42
    assert perfkit_core.load(profile(vfield(1, 2) + damaged)).events["correlation"][0] == -1
    with pytest.raises(
        TraceError, match=r"not an XSpace protobuf \(\*.xplane.pb\): a varint runs past the end"
    ):
        perfkit_core.load(profile(vfield(1, 1) + damaged))


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "the file is empty"),
        (b"\x0a\xff\xff\xff\xff\x0f", "not an XSpace protobuf"),
        (b'{"traceEvents": []}', "not an XSpace protobuf"),
        (b"\x22\x02ab", "without planes"),
    ],
)
def test_bad_xplane_files_fail_with_one_line_naming_the_file(tmp_path, data, reason):
    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(data)
    with pytest.raises(TraceError) as info:
        perfkit_core.load(bad)
    assert reason in str(info.value) and str(bad) in str(info.value)
    cli = subprocess.run(
        [sys.executable, "-m", "perfkit_core", "report", str(bad)], capture_output=True, text=True
    )
    assert cli.returncode == 2 and len(cli.stderr.strip().splitlines()) == 1, cli.stderr


def test_times_out_of_range_fail_with_one_line(tmp_path):
    event = vfield(1, 1) + vfield(2, 2**63 - 1) + vfield(3, 5)
    line = vfield(1, 1) + field(2, b"t") + vfield(3, 10) + field(4, event)
    bad = tmp_path / "far.xplane.pb"
    bad.write_bytes(field(1, field(2, b"/host:CPU") + field(3, line)))
    with pytest.raises(TraceError, match="offset_ps 9223372036854775807 is out of range"):
        perfkit_core.load(bad)


def test_a_truncated_profile_fails_cleanly(tmp_path):
    cut = tmp_path / "cut.xplane.pb"
    data = XPLANE.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="not an XSpace protobuf"):
        perfkit_core.load(cut)


# --- the compiled reader against the pure-Python reader it replaced ----------------------


def assert_same_run(path: Path) -> None:
    """``perfkit_xla.load_xplane`` and the pure-Python reader perfkit-xla shipped before
    (tests/xla_reference.py) give the same run: every column, every row, the metadata."""
    import pandas as pd

    from perfkit_xla import load_xplane
    from tests import xla_reference

    new, old = load_xplane(path), xla_reference.load_xplane(path)
    pd.testing.assert_frame_equal(new.events, old.events, check_exact=True)
    assert new.meta == old.meta


@pytest.mark.parametrize("profile", ["jax", "tensorflow"])
def test_the_reader_gives_the_run_the_pure_python_reader_gave(profile):
    assert_same_run(XPLANE if profile == "jax" else next(TF_LOG_DIR.rglob("*.xplane.pb")))


@needs_jax
def test_the_reader_gives_the_same_run_on_a_fresh_jax_profile(tmp_path):
    import jax

    from perfkit_xla.demo import mlp_training, run_steps

    step, _ = mlp_training()
    run_steps(step, 2, annotate=False)
    with jax.profiler.trace(str(tmp_path)):
        run_steps(step, 20, first=2)
    (xplane,) = tmp_path.rglob("*.xplane.pb")
    assert_same_run(xplane)


#: A TensorFlow program profiled for the test below, in a process of its own (importing
#: tensorflow here would make ``perfkit_xla.profile`` ask which framework the tests mean).
TF_PROFILE_SCRIPT = """
import sys
import tensorflow as tf

w = tf.Variable(tf.zeros((64, 10)))
x, y = tf.ones((32, 64)), tf.ones((32, 10))
opt = tf.keras.optimizers.SGD(0.1)

@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - y) ** 2)
    opt.apply_gradients([(tape.gradient(loss, w), w)])
    return loss

step()
tf.profiler.experimental.start(sys.argv[1])
for i in range(5):
    with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
        step()
tf.profiler.experimental.stop()
"""


@needs_tf
def test_the_reader_gives_the_same_run_on_a_fresh_tensorflow_profile(tmp_path):
    made = subprocess.run(
        [sys.executable, "-c", TF_PROFILE_SCRIPT, str(tmp_path)], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr[-2000:]
    (xplane,) = tmp_path.rglob("*.xplane.pb")
    assert_same_run(xplane)


# Hand-written XSpaces with every kind of stat value, events whose fields come in any order or
# twice, event metadata that gives stats, aggregates, device planes: both readers agree.
STAT_NAMES = [
    "step_num", "hlo_op", "hlo_module", "program_id", "tf_op", "perfkit", "flops",
    "model_flops", "bytes_transferred", "num_bytes", "correlation_id", "input_shapes", "shape",
    "input_dtypes", "process_id", "_c", "name",
]  # fmt: skip
EVENT_NAMES = [
    "train", "dot.1", "$demo.py:10 step", "PjitFunction(step)", "Iterator::Map", "a/b:MatMul",
    "cuLaunchKernel", "all-reduce.2", "MemcpyHtoD", "memset32", "ThreadpoolListener::x", "",
]  # fmt: skip
PLANE_NAMES = ["/host:CPU", "/device:GPU:0", "/device:TPU:1", "Task Environment", "other"]
LINE_NAMES = ["python", "Stream #1", "XLA Ops", "XLA Modules", "tf_data_iterator", "Steps"]
ODD = [0, 1, 7, 127, 128, 300, 2**31, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64 - 1]


def _stat_value(data, ids: list[int]) -> bytes:
    import struct

    from hypothesis import strategies as st

    kind = data.draw(st.sampled_from(["double", "uint", "int", "str", "bytes", "ref", "none"]))
    if kind == "double":
        number = data.draw(st.sampled_from([0.0, 1.5, -2.0, 3e9, 1e300, float("nan")]))
        return varint(2 << 3 | 1) + struct.pack("<d", number)
    if kind in ("uint", "int", "ref"):
        number = data.draw(st.sampled_from([*ODD, -1, -300]))
        if kind == "ref":
            number = data.draw(st.sampled_from([*ids, 999]))
        return vfield({"uint": 3, "int": 4, "ref": 7}[kind], number)
    if kind in ("str", "bytes"):
        text = data.draw(st.sampled_from([b"", b"user", b"12", b"2.5", b"[[3, 4]]", b"\xc3\x28"]))
        return field(5 if kind == "str" else 6, text)
    return b""


def _stat(data, ids: list[int]) -> bytes:
    """An XStat: one of the plane's stat ids (or an unknown one) and a value of any kind."""
    from hypothesis import strategies as st

    return vfield(1, data.draw(st.sampled_from([*ids, 77]))) + _stat_value(data, ids)


def _random_xspace(data) -> bytes:
    from hypothesis import strategies as st

    out = b""
    for _ in range(data.draw(st.integers(1, 3))):
        plane_name = data.draw(st.sampled_from(PLANE_NAMES))
        ids = data.draw(st.lists(st.sampled_from([1, 2, 3, 5, 130, 300]), unique=True, max_size=5))
        names = {i: data.draw(st.sampled_from(STAT_NAMES)) for i in ids}
        plane = field(2, plane_name.encode())
        for i, name in names.items():
            plane += field(5, vfield(1, i) + field(2, vfield(1, i) + field(2, name.encode())))

        metadata_ids = [1, 2, 3, 200]
        for m in metadata_ids[: data.draw(st.integers(0, 4))]:
            meta = vfield(1, m) + field(2, data.draw(st.sampled_from(EVENT_NAMES)).encode())
            for _ in range(data.draw(st.integers(0, 2))):
                meta += field(5, _stat(data, ids)) if ids else b""
            plane += field(4, vfield(1, m) + field(2, meta))
        if data.draw(st.booleans()):
            plane += field(6, vfield(1, ids[0]) + vfield(3, 4242)) if ids else b""
        for _ in range(data.draw(st.integers(0 if plane_name == "Task Environment" else 1, 3))):
            line = vfield(1, data.draw(st.sampled_from([1, 2, 1 << 40])))
            line += field(2, data.draw(st.sampled_from(LINE_NAMES)).encode())
            line += vfield(3, data.draw(st.sampled_from([0, 5, 10**6, 10**18])))
            for _ in range(data.draw(st.integers(0, 8))):
                parts = [
                    vfield(1, data.draw(st.sampled_from([*metadata_ids, 9]))),
                    vfield(2, data.draw(st.sampled_from([0, 1, 2_500, 10**9] * 15 + [2**62 + 1]))),
                    vfield(3, data.draw(st.sampled_from([0, 499, 500, 1_500, 10**9]))),
                ]
                parts += [
                    field(4, _stat(data, ids)) for _ in range(data.draw(st.integers(0, 4))) if ids
                ]
                if data.draw(st.integers(0, 9)) == 0:
                    parts.append(vfield(5, 3))  # an aggregate
                if data.draw(st.integers(0, 4)) == 0:
                    parts.append(parts[data.draw(st.integers(0, len(parts) - 1))])  # twice
                order = data.draw(st.permutations(range(len(parts))))
                line += field(4, b"".join(parts[i] for i in order))
            plane += field(3, line)
        out += field(1, plane)
    if data.draw(st.booleans()):
        task = field(5, vfield(1, 1) + field(2, vfield(1, 1) + field(2, b"profile_start_time")))
        out += field(
            1, field(2, b"Task Environment") + task + field(6, vfield(1, 1) + vfield(3, 10**18))
        )
    return out


def _outcome(load, path: Path):
    """The run ``load`` reads from ``path``, or "refused" (TraceError), or "crashed"."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return load(path)
    except TraceError:
        return "refused"
    except (OverflowError, ValueError):
        return "crashed"  # the pure-Python reader's numbers that did not fit int64


def test_both_readers_agree_on_hand_written_xspaces(tmp_path):
    import pandas as pd
    from hypothesis import HealthCheck, given, settings
    from hypothesis import event as note
    from hypothesis import strategies as st

    from perfkit_xla import load_xplane
    from tests import xla_reference

    @settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data())
    def check(data) -> None:
        path = tmp_path / "h.xplane.pb"
        path.write_bytes(_random_xspace(data))
        new, old = _outcome(load_xplane, path), _outcome(xla_reference.load_xplane, path)
        note(f"pure Python: {old if isinstance(old, str) else 'loaded'}")
        assert new != "crashed"  # the new reader refuses those with one line
        if isinstance(old, str):
            assert new == "refused", old
        else:
            assert not isinstance(new, str)
            pd.testing.assert_frame_equal(new.events, old.events, check_exact=True)
            assert new.meta == old.meta

    check()


# --- the mapping and agreement with the trace viewer --------------------------------------


def test_every_event_of_the_trace_viewer_is_a_row_with_its_time(run):
    """Call counts and total time per name agree with the trace viewer data JAX wrote beside
    the profile (within 1%; they agree to the nanosecond), and so does each start."""
    events = viewer_events(VIEWER)
    calls, total = viewer_totals(events)
    ev = run.events
    ours = ev.groupby("name", observed=True)["dur_ns"].agg(["size", "sum"])
    assert len(ev) == len(events) == run.meta["accounting"]["rows"]
    assert set(ours.index) == set(calls)
    for name, (n, t) in ours.iterrows():
        assert n == calls[name], name
        assert t == pytest.approx(total[name], rel=0.01, abs=1.0), name
    origin = run.meta["extra"]["profile_start_ns"]
    viewer_starts = sorted((e["name"], round(e["ts"] * 1000)) for e in events)
    ours_starts = sorted(
        zip(ev["name"].astype(str), (ev["start_ns"] - origin).tolist(), strict=True)
    )
    assert ours_starts == viewer_starts


def test_operator_view_agrees_with_the_trace_viewer_xla_ops(run):
    events = [e for e in viewer_events(VIEWER) if "hlo_op" in e.get("args", {})]
    calls, total = viewer_totals(events)
    table = run.summary("operator", top=None).set_index("name")
    assert len(table) == len(calls)
    for name in calls:
        assert table.loc[name, "calls"] == calls[name]
        assert table.loc[name, "cpu_total_ns"] == pytest.approx(total[name], rel=0.01)


def test_steps_come_from_step_trace_annotations(run):
    train = [e for e in viewer_events(VIEWER) if e["name"] == "train"]
    assert run.meta["steps"] == [int(e["args"]["step_num"]) for e in train] == [2, 3, 4, 5, 6]
    steps = run.summary("steps")
    assert steps["dur_ns"].tolist() == pytest.approx([e["dur"] * 1000 for e in train], abs=1)
    ev = run.events
    ops = ev[ev["kind"] == "operator"]
    assert (ops["step"] >= 0).all(), "every XLA op ran inside a step"


def test_kinds_and_categories(run):
    from perfkit_xla.kinds import CATEGORY_KINDS

    ev = run.events
    pairs = set(zip(ev["category"].astype(str), ev["kind"].astype(str), strict=True))
    assert all(CATEGORY_KINDS[c] == k for c, k in pairs)
    by_cat = ev.groupby("category", observed=True).size()
    assert set(by_cat.index) >= {"Step", "XLA Op", "JAX Dispatch", "Python", "Profiler", "TraceMe"}
    xla = ev[ev["category"] == "XLA Op"]
    assert set(xla["stack"].astype(str).str.split("\n").str[-1]) <= {
        "jit(train_step)",
        "jit_train_step",  # the module (hlo_module) where the HLO names no operation
    }
    assert set(ev.loc[ev["category"] == "Python", "name"].astype(str).str[:1]) == {"$"}
    # Host events only: the CPU run has no device plane.
    assert (ev["stream"] == -1).all() and run.meta["devices"] == []
    assert run.framework == "jax" and run.meta["framework_version"]
    assert set(run.meta["compute_threads"]) == set(xla["tid"].tolist())


def test_shapes_and_provenance_come_from_the_hlo_protos(run):
    """The metadata plane's HLO protos give each XLA op its input shapes and dtypes and the JAX
    operation it came from: the MLP's matmuls take (batch 32, width 64) activations and
    (64, 64) or (64, 10) weights, forward (jvp) and backward (transpose of jvp) alike."""
    ev = run.events
    xla = ev[ev["category"] == "XLA Op"]
    assert (xla["input_shapes"].astype(str) != "").all()
    matmuls = xla[xla["stack"].astype(str).str.startswith("dot_general")]
    shapes = {json.loads(s) and tuple(map(tuple, json.loads(s))) for s in matmuls["input_shapes"]}
    assert ((32, 64), (64, 64)) in shapes and ((32, 64), (64, 10)) in shapes
    for s in set(matmuls["input_dtypes"].astype(str)):
        assert set(json.loads(s)) == {"float32"}
    frames = matmuls["stack"].astype(str).str.split("\n")
    assert {f[1] for f in frames} >= {"jvp()", "transpose(jvp())"}
    assert {f[-1] for f in frames} == {"jit(train_step)"}
    table = run.summary("operator", group_by_input_shape=True, top=None)
    assert len(table) >= len(set(xla["name"]))


def test_the_guide_lists_every_category_with_its_kind():
    from perfkit_xla.kinds import CATEGORY_KINDS

    page = (REPO / "docs" / "guide" / "jax_tensorflow.md").read_text(encoding="utf-8")
    listed: dict[str, str] = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            names = [n.strip(" `") for n in cells[0].split(",")]
            kinds = [k.strip(" `") for k in cells[1].split(",")]
            kinds = kinds if len(kinds) == len(names) else kinds * len(names)
            listed.update(zip(names, kinds, strict=True))
    assert listed == CATEGORY_KINDS


def test_every_view_and_advice_run(run):
    from perfkit_core.views import registered_views

    for name in registered_views():
        table = run.summary(name)
        assert table is not None, name
    findings = run.advise()
    for finding in findings:
        assert finding.remedy
    # The step runs on XLA's executor threads: time without recorded work is not Python's.
    assert "python-overhead" not in {f.rule for f in findings}
    family = run.summary("family").set_index("name")
    assert "data" not in family.index, "XLA:CPU executor threads are not data loaders"
    assert "matmul (forward)" in family.index


def test_family_time_adds_up_to_the_step(run):
    """The family view splits the step's wall time (the XLA ops on the executor threads fill the
    time the step's thread waits in the jitted call), so its rows add up to the mean step, and
    no XLA op counts twice: the compute families hold at most the XLA ops' own time."""
    family = run.summary("family").set_index("name")
    step = run.summary("model").set_index("name").loc["step", "per_step_ns"]
    assert family["per_step_ns"].sum() == pytest.approx(step, rel=1e-9)
    ev = run.events
    ops = ev.loc[ev["category"] == "XLA Op", "dur_ns"].sum() / len(run.meta["steps"])
    compute = family.drop(
        index=[n for n in family.index if n in ("data", "optimizer", "unattributed", "device tail")]
        + [n for n in family.index if n.startswith(("overhead", "runtime"))]
    )
    assert 0 < compute["per_step_ns"].sum() <= ops * (1 + 1e-9)


def test_canonical_ops_and_families_of_xla_and_tf_ops():
    from perfkit_core.views.costmodel.canonical import Resolver

    resolver = Resolver("jax")
    assert resolver.op("dot.3") == "matmul"
    assert resolver.op("ynn_fusion.2") == "matmul"
    assert resolver.op("add_reduce_fusion.1") == "sum"
    assert resolver.op("convolution.4") == "conv"
    assert resolver.op("all-reduce.1") == "all_reduce"
    assert resolver.family("all_reduce") == "communication"
    assert resolver.family(resolver.op("broadcast_multiply_fusion")) == "elementwise"
    tf = Resolver("tensorflow")
    assert tf.op("sequential/dense/MatMul:MatMul") == "linear"  # its Keras layer
    assert tf.op("model/MatMul:MatMul") == "matmul"
    assert tf.op("conv2d/Conv2D:Conv2D") == "conv"
    assert tf.family(tf.op("bn/FusedBatchNormV3:FusedBatchNormV3")) == "norm"
    # Other frameworks' names are not answered for.
    assert Resolver("torch").op("dot.3") == "dot.3"


# --- folders, files and the CLI -----------------------------------------------------------


@pytest.mark.parametrize("target", [LOG_DIR, PROFILE, XPLANE, VIEWER])
def test_log_folder_profile_folder_and_files_load_the_same_run(run, target):
    other = perfkit_core.load(target)
    assert other.framework == "jax"
    assert len(other.events) == len(run.events)
    assert other.meta["source"] == str(XPLANE.relative_to(REPO)) or other.meta["source"].endswith(
        "mlp.xplane.pb"
    )


def test_trace_viewer_json_alone_is_explained(tmp_path):
    lone = tmp_path / "host.trace.json.gz"
    lone.write_bytes(VIEWER.read_bytes())
    with pytest.raises(TraceError, match=r"host\.xplane\.pb"):
        perfkit_core.load(lone)


def test_the_torch_adapter_leaves_the_trace_viewer_json_alone():
    from perfkit_core.events import read_head
    from perfkit_torch.plugin import looks_like_kineto

    assert not looks_like_kineto(VIEWER, read_head(VIEWER))


def test_cli_report_of_a_log_folder():
    out = subprocess.run(
        [sys.executable, "-m", "perfkit_core", "report", str(LOG_DIR), "--views", "operator"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "Framework:  jax" in out.stdout and "dot.4" in out.stdout


def test_newest_profile_of_a_log_folder_is_read_and_others_named(tmp_path):
    import shutil

    from perfkit_xla.xplane import load_log_dir

    for name in ("2020_01_01_00_00_00", "2020_01_02_00_00_00"):
        target = tmp_path / "plugins" / "profile" / name
        target.mkdir(parents=True)
        shutil.copyfile(XPLANE, target / "mlp.xplane.pb")
    run = load_log_dir(tmp_path)
    assert "2020_01_02_00_00_00" in run.meta["source"]
    assert run.meta["extra"]["other_profiles"] == ["2020_01_01_00_00_00"]
    assert "2020_01_01" in load_log_dir(tmp_path, run="2020_01_01_00_00_00").meta["source"]
    with pytest.raises(TraceError, match="no profile named"):
        load_log_dir(tmp_path, run="nope")


def test_two_hosts_become_two_ranks(tmp_path):
    import shutil

    for host in ("a", "b"):
        shutil.copyfile(XPLANE, tmp_path / f"{host}.xplane.pb")
    run = perfkit_core.load(tmp_path)
    assert run.meta["ranks"] == [0, 1]
    assert (run.events["rank"] == 1).sum() == (run.events["rank"] == 0).sum()


def test_profile_asks_which_framework_when_both_are_imported(monkeypatch, tmp_path):
    import types

    import perfkit_xla
    from perfkit_xla.capture import _framework

    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    monkeypatch.delitem(sys.modules, "tensorflow", raising=False)
    assert _framework(None) == "jax"
    monkeypatch.setitem(sys.modules, "tensorflow", types.ModuleType("tensorflow"))
    with pytest.raises(ValueError, match="framework='jax' or framework='tensorflow'"):
        perfkit_xla.profile(tmp_path).__enter__()
    assert _framework("tensorflow") == "tensorflow"


def test_reading_needs_no_framework():
    code = (
        "import sys\n"
        "for name in ('jax', 'jaxlib', 'tensorflow'):\n"
        "    sys.modules[name] = None\n"
        "import perfkit_core\n"
        f"run = perfkit_core.load({str(LOG_DIR)!r})\n"
        "print(run.framework, len(run.events))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["jax", str(len(viewer_events(VIEWER)))]


# --- TensorFlow ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tf_run():
    return perfkit_core.load(TF_LOG_DIR)


def test_tensorflow_keras_profile(tf_run):
    """A Keras fit profiled by its TensorBoard callback: the profiled batches are the steps, TF
    ops (``scope/name:Type``) are operators, tf.data's stages are data loading."""
    from perfkit_xla.xspace import decode_xspace

    ev = tf_run.events
    assert tf_run.framework == "tensorflow"
    steps = ev[ev["kind"] == "step"]
    assert steps["name"].astype(str).unique().tolist() == ["Profiled batch"]
    assert tf_run.meta["steps"] == [2, 3, 4]
    ops = ev[ev["kind"] == "operator"]
    assert ops["name"].astype(str).str.fullmatch(r"[^:\s]+:_?[A-Z]\w*").all()
    assert (ops["step"] >= 0).mean() > 0.99
    data = ev[ev["kind"] == "dataloader"]
    assert data["name"].astype(str).str.match(r"Iterator::|IteratorGetNext").all() and len(data)
    # Every timed event of the file is a row; the other rows are the layer spans of op scopes.
    space = decode_xspace(next(TF_LOG_DIR.rglob("*.xplane.pb")).read_bytes())
    native = sum(len(line.metadata_id) for p in space.planes for line in p.lines)
    spans = int((ev["category"] == "layer scope").sum())
    assert (
        len(ev) == native + spans
        and spans == tf_run.meta["accounting"]["layer_spans_from_op_scopes"]
    )
    assert tf_run.meta["accounting"]["events_in_file"] == native
    threads = tf_run.meta["threads"]
    assert tf_run.meta["compute_threads"]
    assert all(threads[str(t)].startswith("tf_Compute") for t in tf_run.meta["compute_threads"])


def test_tensorflow_ops_line_up_by_keras_scope(tf_run):
    from perfkit_core.views.costmodel.canonical import Resolver

    tf = Resolver("tensorflow")
    assert tf.op("StatefulPartitionedCall/sequential_1/dense_1/BiasAdd:_MklNativeFusedMatMul") == (
        "linear"
    )
    assert tf.op(
        "StatefulPartitionedCall/gradient_tape/sequential_1/dense_1/MatMul:_MklMatMul"
    ) == ("linear")
    assert tf.op("StatefulPartitionedCall/sequential_1/layer_normalization_1/Mean:Mean") == (
        "layer_norm"
    )
    assert tf.op("StatefulPartitionedCall/adam/Sub_7:Sub") == "optimizer step"
    assert tf.op("x/MatMul:_MklMatMul") == "matmul"
    family = tf_run.summary("family").set_index("name")
    assert {"matmul (forward)", "matmul (backward)", "norm (backward)", "optimizer"} <= set(
        family.index
    )
    # Backward ops are the ones under gradient_tape/, and they count as backward.
    ev = tf_run.events
    grad = ev["name"].astype(str).str.contains("/gradient_tape/") & (ev["kind"] == "operator")
    assert grad.any()


# --- comparison with a torch run of the same MLP ------------------------------------------


def test_compare_against_a_torch_run_of_the_same_mlp(run, tmp_path):
    pytest.importorskip("torch")
    from perfkit_torch.demo import train_mlp

    runs, _ = train_mlp(tmp_path / "torch", steps=5, background=False)
    torch_run = perfkit_core.load(runs[0])
    comparison = perfkit_core.compare(torch_run, run, labels=["torch", "jax"])
    family = comparison.summary("family").set_index("name")
    assert "matmul (forward)" in family.index
    assert family.loc["matmul (forward)", "jax"] > 0 and family.loc["matmul (forward)", "torch"] > 0
    text = comparison.verdict().sentence()
    assert "jax" in text and "torch" in text


def test_compare_tensorflow_against_a_torch_run_of_the_same_mlp(tf_run, tmp_path):
    pytest.importorskip("torch")
    from perfkit_torch.demo import train_mlp

    runs, _ = train_mlp(tmp_path / "torch", steps=3, background=False)
    comparison = perfkit_core.compare(perfkit_core.load(runs[0]), tf_run, labels=["torch", "tf"])
    family = comparison.summary("family").set_index("name")
    for row in ("matmul (forward)", "matmul (backward)", "norm (forward)", "optimizer"):
        assert family.loc[row, "torch"] > 0 and family.loc[row, "tf"] > 0, row
    ops = comparison.summary("ops")
    assert {"linear (forward)", "linear (backward)", "layer_norm (forward)"} <= set(ops["name"])


# --- profiling with JAX -------------------------------------------------------------------


@needs_jax
def test_profile_saves_a_run_that_agrees_with_the_trace_viewer(tmp_path):
    import perfkit_xla
    from perfkit_xla.demo import mlp_training, run_steps

    step, _ = mlp_training()
    run_steps(step, 2, annotate=False)
    with perfkit_xla.profile(tmp_path, worker_name="w", keep_trace=True) as session:
        run_steps(step, 3, first=2)
    (run_dir,) = session.runs
    assert run_dir.name == "w.step4" and not session.failures
    saved = perfkit_core.load(run_dir)
    assert saved.meta["steps"] == [2, 3, 4] and saved.framework == "jax"
    (viewer,) = (run_dir / "xla_log").rglob("*.trace.json.gz")
    calls, total = viewer_totals(viewer_events(viewer))
    ops = saved.events[saved.events["kind"] == "operator"]
    for name, group in ops.groupby("name", observed=True):
        assert len(group) == calls[name]
        assert group["dur_ns"].sum() == pytest.approx(total[name], rel=0.01)


@needs_jax
def test_profile_without_keep_trace_leaves_only_the_run(tmp_path):
    import jax.numpy as jnp

    import perfkit_xla

    with (
        perfkit_xla.profile(tmp_path, worker_name="w") as session,
        perfkit_core.annotate("my span"),
    ):
        (jnp.ones((8, 8)) @ jnp.ones((8, 8))).block_until_ready()
    (run_dir,) = session.runs
    assert run_dir.name == "w" and not (run_dir / "xla_log").exists()
    saved = perfkit_core.load(run_dir)
    user = saved.events[saved.events["kind"] == "user"]
    assert user["name"].astype(str).tolist() == ["my span"]


@needs_jax
def test_profile_that_cannot_be_converted_warns_once_and_keeps_the_log(tmp_path, monkeypatch):
    import jax.numpy as jnp

    import perfkit_xla
    from perfkit_xla import xplane

    def broken(*args, **kwargs):
        raise TraceError(tmp_path, "simulated failure")

    monkeypatch.setattr(xplane, "load_log_dir", broken)
    with (
        pytest.warns(RuntimeWarning, match="simulated failure"),
        perfkit_xla.profile(tmp_path, worker_name="w") as session,
    ):
        jnp.ones(4).block_until_ready()
    assert session.runs == []
    ((kept, reason),) = session.failures
    assert kept.name == "xla_log" and any(kept.rglob("*.xplane.pb"))
    assert "simulated failure" in reason


@needs_jax
def test_demo_hook_profiles_jax(tmp_path):
    from perfkit_xla import plugin

    (run_dir,) = plugin.perfkit_demo(directory=tmp_path, steps=3)
    assert run_dir.parent == tmp_path / "jax"
    run = perfkit_core.load(run_dir)
    assert run.meta["steps"] == [2, 3, 4]
    # after the compile, the steps were timed without the profiler too, as torch's are
    timed = run.meta["step_timer"]
    assert len(timed["unprofiled_ns"]) == 30 and len(timed["profiled_ns"]) == 3
    assert not timed.get("unknown_ns")


@needs_tf
def test_profile_saves_a_tensorflow_run_with_steps_and_user_spans(tmp_path):
    import tensorflow as tf

    import perfkit_xla

    w = tf.Variable(tf.zeros((64, 10)))
    x, y = tf.ones((32, 64)), tf.ones((32, 10))
    opt = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((x @ w - y) ** 2)
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss

    step()
    # TensorFlow imports JAX when it is installed, so the framework is named.
    with perfkit_xla.profile(tmp_path, worker_name="tf", framework="tensorflow") as session:
        for i in range(3):
            with (
                tf.profiler.experimental.Trace("train", step_num=i, _r=1),
                perfkit_core.annotate("my span"),
            ):
                step()
    (run_dir,) = session.runs
    assert run_dir.name == "tf.step2" and not session.failures
    run = perfkit_core.load(run_dir)
    assert run.framework == "tensorflow" and run.meta["steps"] == [0, 1, 2]
    assert run.meta["framework_version"] == tf.__version__
    ev = run.events
    assert ev.loc[ev["kind"] == "user", "name"].astype(str).tolist() == ["my span"] * 3
    assert (ev["kind"] == "operator").sum() > 0


# --- the model: Keras layers and their parameters for the layers view ----------------------


@needs_tf
def test_keras_mlp_parameters_as_tfprof_counts_them(tmp_path):
    """tfprof's MLP in Keras, profiled by ``perfkit_xla.profile(dir, model=model)``: the layers
    view reads tfprof's parameter counts, on the layers the ops' name scopes recorded (one call
    each per step), and their times add up to the forward and backward phases."""
    from tests.mlp_models import (
        EXPECTED_PARAMS,
        HIDDEN1_WEIGHT,
        TOTAL_PARAMS,
        train_in_subprocess,
    )

    run_dir = train_in_subprocess("keras", tmp_path)
    run = perfkit_core.load(run_dir)
    assert run.meta["steps"] == [0, 1, 2]
    tree = run.summary("layers", params=True)
    layers = tree.set_index("name")
    assert tree[tree["depth"] == 1].iloc[0]["params_with_children"] == TOTAL_PARAMS
    for name, count in EXPECTED_PARAMS.items():
        assert layers.loc[name, "params_own"] == count
        assert layers.loc[name, "params_with_children"] == count
        assert layers.loc[name, "host_own_ns"] > 0
        assert layers.loc[name, "calls_per_step"] == 1
    hidden1 = int(np.flatnonzero(tree["name"].to_numpy() == "hidden1")[0])
    weight = tree.iloc[hidden1 + 1]
    assert weight["name"] == "kernel" and weight["params_own"] == HIDDEN1_WEIGHT
    assert weight["shape"] == "784x128" and weight["dtype"] == "float32"  # Keras' (in, out)
    assert weight["params_own_bytes"] == HIDDEN1_WEIGHT * 4
    # Recomputed from the saved record: the layers' own parameters are the model's, and each
    # described layer is a layer the run recorded (its key is one of the trace's layer keys).
    from perfkit_core.views.anatomy.structure import structure

    meta = json.loads((run_dir / "meta.json").read_text())
    recorded = meta["model"]["layers"]
    assert sum(p["count"] for layer in recorded for p in layer["params"]) == TOTAL_PARAMS
    assert {layer["match"] for layer in recorded} <= set(structure(run).layer_key.values())
    # The layers' own times plus (no layer) are the model view's forward and backward phases.
    model = run.summary("model").set_index("name")
    phases = model.loc["forward", "per_step_ns"] + model.loc["backward", "per_step_ns"]
    weights = tree["shape"].isna()
    assert tree.loc[weights, "host_own_ns"].sum() == pytest.approx(phases, rel=1e-9)
    assert "parameters not recorded" not in tree.attrs["note"]


def test_tensorflow_layers_from_op_scopes(tf_run):
    """The Keras MLP's ops carry their model's and layer's name scopes: the layer tree is the
    model's (the keys torch's and Paddle's same model get), each layer called once per step;
    the spans of one call that the executor cut count once; gradient ops are linked to the
    forward ops of their layer; the tree's own times add up to the forward and backward
    phases, each layer's to the time of its ops, recomputed from the ops' names."""
    from perfkit_xla.scopes import parse

    tree = tf_run.summary("layers")
    paths = tree["path"].tolist()
    blocks = [
        f"sequential[1]/{kind}[{i}]"
        for i in range(1, 5)
        for kind in ("linear", "layernorm", "relu")
    ]
    assert paths == ["sequential[1]", *blocks, "sequential[1]/linear[5]", ""]
    assert (tree.iloc[:-1]["calls_per_step"] == 1).all()
    # TensorFlow's ops record no shapes: no FLOPs are known, and none reads as zero.
    assert tree["model_gflops_own"].isna().all() and "model FLOPs unknown" in tree.attrs["note"]
    model = tf_run.summary("model").set_index("name")
    phases = model.loc["forward", "per_step_ns"] + model.loc["backward", "per_step_ns"]
    assert tree["host_own_ns"].sum() == pytest.approx(phases, rel=1e-9)
    ev = tf_run.events
    names = ev["name"].astype(str)
    ops = (ev["kind"] == "operator").to_numpy()
    grads = ops & names.str.contains("/gradient_tape/sequential").to_numpy()
    assert grads.any() and (ev["forward_op"].to_numpy()[grads] >= 0).all()
    linked = ev["forward_op"].to_numpy()[grads]
    same_layer = [
        parse(names.iloc[g])[:2] == parse(names.iloc[f])[:2]
        for g, f in zip(np.flatnonzero(grads).tolist(), linked.tolist(), strict=True)
    ]
    assert all(same_layer)
    # The forward ops of the first Dense, found by name, lie within its spans and nowhere else.
    spans = ev[(ev["category"] == "layer scope") & (ev["full_name"] == "sequential_1/dense_1")]
    assert len(spans) and set(spans["name"].astype(str)) == {"dense"}
    dense = ops & names.str.match(r"StatefulPartitionedCall/sequential_1/dense_1/").to_numpy()
    dense &= ~names.str.endswith(":ReadVariableOp").to_numpy()
    start = ev["start_ns"].to_numpy()
    inside = np.zeros(len(ev), dtype=bool)
    for a, d in zip(spans["start_ns"].tolist(), spans["dur_ns"].tolist(), strict=True):
        inside |= (start >= a) & (start < a + d)
    assert (inside[dense]).all()
    assert tf_run.meta["accounting"]["layer_spans_from_op_scopes"] == int(
        (ev["category"] == "layer scope").sum()
    )


def test_tensorflow_scope_names():
    from perfkit_xla.scopes import parse

    assert parse("StatefulPartitionedCall/sequential_1/dense_1/BiasAdd:_MklNativeFusedMatMul") == (
        "sequential_1",
        "dense_1",
        "_MklNativeFusedMatMul",
        False,
    )
    assert parse("StatefulPartitionedCall/gradient_tape/sequential_1/dense_1/MatMul:MatMul")[
        1:
    ] == ("dense_1", "MatMul", True)
    assert parse("StatefulPartitionedCall/adam/Sub_7:Sub")[:2] == ("", "")
    loss = "StatefulPartitionedCall/compile_loss/sparse_categorical_crossentropy/Mean:Mean"
    assert parse(loss)[:2] == ("", "")
    assert parse("StatefulPartitionedCall/Add:AddV2")[:2] == ("", "")
    assert parse("block/MatMul:MatMul")[:2] == ("block", "")


def test_describe_model_of_a_parameter_tree():
    """A Flax-style parameter tree (``{"params": {"Dense_0": {"kernel", "bias"}, ...}}``, arrays
    of any framework): one layer per mapping, keyed by its name's type (``Dense_0`` ->
    ``linear``), each with its own arrays, counted in its dtype's bytes."""
    from perfkit_xla.model import describe_model, name_type

    tree = {
        "params": {
            "Dense_0": {"kernel": np.zeros((784, 128), np.float32), "bias": np.zeros(128)},
            "Dense_1": {"kernel": np.zeros((128, 32), np.float16)},
            "LayerNorm_0": {"scale": np.zeros(32, np.float32)},
        }
    }
    described = describe_model(tree, name="MLP")
    assert described["match"] == "key"
    by_key = {layer["match"]: layer for layer in described["layers"]}
    assert list(by_key) == ["mlp[1]", "mlp[1]/linear[1]", "mlp[1]/linear[2]", "mlp[1]/layernorm[1]"]
    first = by_key["mlp[1]/linear[1]"]
    assert first["name"] == "Dense_0" and first["type"] == "Dense"
    assert [(p["name"], p["count"], p["bytes"]) for p in first["params"]] == [
        ("kernel", 100_352, 401_408),
        ("bias", 128, 1024),  # numpy's default float64
    ]
    assert by_key["mlp[1]/linear[2]"]["params"][0]["bytes"] == 128 * 32 * 2
    assert name_type("dense_1_2") == "linear" and name_type("hidden1") == "hidden1"
    assert name_type("layer_normalization_3") == "layernorm" and name_type("re_lu_1") == "relu"
    with pytest.raises(TypeError, match="Keras model or a mapping"):
        describe_model(42)
