"""``perfkit serve``'s Timeline tab: its API recomputed from the raw Kineto JSON of the V100
ResNet-50 trace (lanes, steps, launch links, search) and from the report (the phase bands),
and the tab driven in real headless Chromium: bands drawn, zoom to a step, a convolution's
kernels through their launch links, a folded thread, a search.

Set ``PERFKIT_SCREENSHOTS`` to a folder to keep full-page screenshots of the tab.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from conftest import settle, shared_trace

pytest.importorskip("flask", reason="perfkit serve needs Flask (a perfkit requirement)")

V100 = "gpu/resnet50_v100_num_workers_0.pt.trace.json.gz"
PHASE_COLORS = {
    "data": "#8e6c8a",
    "forward": "#2364aa",
    "backward": "#3fa34d",
    "optimizer": "#e39b1b",
}
LINK = (217, 72, 15)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("timeline")
    (root / "gpu").mkdir()
    shutil.copy(shared_trace("resnet_nw0"), root / V100)
    import torch_profiles

    torch_profiles.record(root / "demo", steps=4)
    settle(root)
    return root


@pytest.fixture(scope="module")
def server(logdir):
    from werkzeug.serving import make_server

    from perfkit_core.serve import create_app

    httpd = make_server("127.0.0.1", 0, create_app(logdir, workers=2), threaded=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.port}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def raw(logdir) -> list[dict]:
    with gzip.open(logdir / V100, "rt") as fh:
        return json.load(fh)["traceEvents"]


def get(server: str, path: str, **params: object) -> tuple[int, dict]:
    url = f"{server}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=600) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return exc.code, json.loads(
            body
        ) if exc.headers.get_content_type() == "application/json" else {}


def timeline(server: str, part: str, run: str = V100, **params: object) -> dict:
    status, body = get(server, f"/api/timeline/{part}", run=run, **params)
    assert status == 200, (part, status, body)
    return body


def demo_run(logdir: Path) -> str:
    return next(logdir.glob("demo/**/meta.json")).parent.relative_to(logdir).as_posix()


def test_lanes_and_steps_are_the_traces_threads_streams_and_profiler_steps(server, raw):
    meta = timeline(server, "meta")
    spans = [e for e in raw if e.get("ph") == "X" and e.get("cat") != "Trace"]
    threads = {int(e["tid"]) for e in spans if e["cat"] in ("Operator", "Runtime")}
    streams = {
        (e["args"]["device"], e["args"]["stream"]) for e in spans if "stream" in e.get("args", {})
    }
    lanes = meta["lanes"]
    assert {lane["tid"] for lane in lanes if lane["kind"] == "thread"} == threads
    assert {
        (lane["device"], lane["stream"]) for lane in lanes if lane["kind"] == "stream"
    } == streams
    assert [lane["kind"] for lane in lanes] == ["thread"] * len(threads) + ["stream"] * len(streams)
    assert lanes[-1]["label"] == "GPU 0 · stream 7"
    steps = sorted(
        (e for e in spans if e["name"].startswith("ProfilerStep#")), key=lambda e: e["ts"]
    )
    assert [s[2] for s in meta["steps"]] == [int(e["name"].split("#")[1]) for e in steps]
    # a step band is the step as every step time is: its host span stretched over the device
    # work launched in it (by runtime calls of any thread that start within it), after the
    # step before it
    device = {e["args"]["correlation"]: e for e in spans if "stream" in e.get("args", {})}
    calls = [e for e in spans if e["cat"] == "Runtime"]
    previous = None
    for (s, e, _, _), step in zip(meta["steps"], steps, strict=True):
        h0, h1 = step["ts"] * 1000, (step["ts"] + step["dur"]) * 1000
        ends = [
            (device[c["args"]["correlation"]]["ts"] + device[c["args"]["correlation"]]["dur"])
            * 1000
            for c in calls
            if step["ts"] <= c["ts"] <= step["ts"] + step["dur"]
            and c["args"]["correlation"] in device
        ]
        start = h0 if previous is None else max(h0, previous)
        assert s + meta["origin_ns"] == start
        assert e + meta["origin_ns"] == max([h1, *ends])
        previous = e + meta["origin_ns"]


def test_phase_bands_add_up_to_the_headlines_phases(server):
    meta = timeline(server, "meta")
    status, document = get(server, "/api/runs/" + V100)
    assert status == 200
    per_phase = collections.Counter()
    for s, e, phase in meta["phases"]:
        per_phase[phase] += e - s
    steps = len(meta["steps"])
    for phase in document["headline"]["phases"]:
        assert per_phase[phase["name"]] / steps == pytest.approx(phase["per_step_ns"], abs=1), phase
    # the bands tile the steps: no gap, no overlap, nothing outside
    total = sum(e - s for s, e, _, _ in meta["steps"])
    assert sum(per_phase.values()) == total


def test_a_slice_sends_each_event_once_or_merges_it_below_a_pixel(server, logdir):
    from perfkit_core import load

    run = load(logdir / V100)
    ev = run.events
    meta = timeline(server, "meta")
    kind = ev["kind"].astype(str).to_numpy()
    start = ev["start_ns"].to_numpy() - meta["origin_ns"]
    end = start + ev["dur_ns"].to_numpy()
    drawn = ~np.isin(kind, ["memory", "step", "profiler"])
    for t0, t1, px in (
        (0, meta["span_ns"], meta["span_ns"] / 1200),
        (*meta["steps"][1][:2], 50_000),
    ):
        found = timeline(server, "slice", t0=t0, t1=t1, px=px)
        for lane, shown in zip(meta["lanes"], found["lanes"], strict=True):
            if lane["kind"] == "thread":
                mine = (ev["tid"].to_numpy() == lane["tid"]) & (ev["stream"].to_numpy() < 0)
            else:
                mine = ev["stream"].to_numpy() == lane["stream"]
            inside = drawn & mine & (end > t0) & (start < t1)
            events = np.asarray(shown["events"], dtype=np.int64).reshape(-1, 6)
            merged = np.asarray(shown["merged"], dtype=np.int64).reshape(-1, 4)
            assert len(events) + merged[:, 3].sum() == inside.sum(), lane["label"]
            assert (events[:, 1] >= px).all()
            rows = events[:, 3]
            assert inside[rows].all()
            assert (events[:, 0] == start[rows]).all() and (
                events[:, 1] == end[rows] - start[rows]
            ).all()
            small = inside.copy()
            small[rows] = False
            assert ((end - start)[small] < px).all()


def _first_convolution(raw: list[dict]) -> tuple[dict, list[dict]]:
    """The first aten::cudnn_convolution and the device work its runtime calls launched (the
    same correlation), from the raw JSON."""
    conv = min(
        (e for e in raw if e.get("name") == "aten::cudnn_convolution"), key=lambda e: e["ts"]
    )
    calls = [
        e
        for e in raw
        if e.get("cat") == "Runtime"
        and e["tid"] == conv["tid"]
        and conv["ts"] <= e["ts"] <= conv["ts"] + conv["dur"]
    ]
    correlations = {e["args"]["correlation"] for e in calls}
    kernels = [
        e
        for e in raw
        if e.get("cat") in ("Kernel", "Memcpy", "Memset")
        and e["args"].get("correlation") in correlations
    ]
    return conv, sorted(kernels, key=lambda e: e["ts"])


def test_an_operators_launch_links_are_the_traces_correlations(server, raw):
    conv, kernels = _first_convolution(raw)
    assert kernels
    first = timeline(server, "search", q="aten::cudnn_convolution")["matches"][0]
    assert first["name"] == "aten::cudnn_convolution"
    detail = timeline(server, "event", id=first["id"])
    assert detail["dur_ns"] == conv["dur"] * 1000
    assert detail["columns"]["input_shapes"].startswith("[[32, 3, 224, 224]")
    launched = detail["launched"]
    assert [k["name"] for k in launched["events"]] == [k["name"] for k in kernels]
    assert launched["count"] == len(kernels)
    assert launched["device_ns"] == sum(k["dur"] for k in kernels) * 1000
    assert {k["launcher"]["name"] for k in launched["events"]} == {"cudaLaunchKernel"}
    back = timeline(server, "event", id=launched["events"][-1]["id"])
    chain = [k["name"] for k in back["launched_by"]]
    assert chain[:2] == ["cudaLaunchKernel", "aten::cudnn_convolution"]
    assert "aten::conv2d" in chain


def test_search_counts_every_event_whose_name_holds_the_text(server, raw):
    found = timeline(server, "search", q="CUDNN_convolution")
    names = collections.Counter(
        e["name"] for e in raw if e.get("ph") == "X" and "aten::cudnn_convolution" in e["name"]
    )
    assert found["total"] == sum(names.values())
    assert dict(found["names"]) == dict(names)
    starts = [m["start_ns"] for m in found["matches"]]
    assert starts == sorted(starts)


def test_bad_requests_name_what_is_wrong(server, logdir):
    assert get(server, "/api/timeline/slice", run=V100, t0="x", t1=1, px=1) == (
        400,
        {"error": "t0 must be a number"},
    )
    assert get(server, "/api/timeline/slice", run=V100, t0=0, t1="inf", px=1)[0] == 400
    assert get(server, "/api/timeline/meta", run="../etc/passwd")[0] == 404
    assert get(server, "/api/timeline/other", run=V100)[0] == 404
    status, body = get(server, "/api/timeline/event", run=V100, id=10**9)
    assert status == 404 and V100 in body["error"]


# ---- in the browser ----


def shot(page, name: str) -> None:
    folder = os.environ.get("PERFKIT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"timeline-{name}.png"), full_page=True)


def open_timeline(browser, server: str, run: str):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(f"{server}/run/{run}#tab=timeline")
    page.wait_for_selector('#timeline[data-ready="1"]', timeout=600_000)
    return page, errors


def pixel(page, canvas: str, x: float, y: float) -> tuple[int, int, int]:
    return tuple(
        page.evaluate(
            "([sel, x, y]) => { const c = document.querySelector(sel); const r = window.devicePixelRatio || 1;"
            " return Array.from(c.getContext('2d').getImageData(Math.round(x * r), Math.round(y * r), 1, 1).data.slice(0, 3)); }",
            [canvas, x, y],
        )
    )


def rgb(color: str) -> tuple[int, int, int]:
    return tuple(int(color[i : i + 2], 16) for i in (1, 3, 5))


def frames(page) -> int:
    return int(page.get_attribute("#timeline", "data-frames") or 0)


def wait_until(page, expression: str, timeout: float = 60) -> None:
    """Poll ``expression`` in the page (the pages' policy forbids the evaluated strings that
    ``wait_for_function`` uses)."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, expression
        page.wait_for_timeout(20)


def wait_frame(page, before: int) -> None:
    """Until a frame after the ``before``-th is painted with the data the view asked for."""
    wait_until(page, f"Number(document.querySelector('#timeline').dataset.frames) > {before}")
    wait_until(page, "window.perfkitTimeline.state.seq === window.perfkitTimeline.state.shownSeq")


def test_the_v100_timeline_shows_threads_streams_steps_and_phases(server, browser):
    meta = timeline(server, "meta")
    page, errors = open_timeline(browser, server, V100)
    labels = page.eval_on_selector_all(".tl-lane", "ls => ls.map(l => l.title)")
    assert labels == [lane["label"] for lane in meta["lanes"]]
    assert labels[-1] == "GPU 0 · stream 7"
    assert (
        len(page.query_selector_all(".tl-lane .tl-fold")) == 2
    )  # the threads fold, the stream not
    boxes = page.evaluate("window.perfkitTimeline.state.stepBoxes")
    assert [round(b[2]) for b in boxes] == [s[0] for s in meta["steps"]]
    view = page.evaluate("window.perfkitTimeline.view()")
    width = page.evaluate("document.querySelector('#tl-head').clientWidth")
    for s, e, phase in meta["phases"]:
        x = (s + e) / 2
        px = (x - view["t0"]) / (view["t1"] - view["t0"]) * width
        if phase in PHASE_COLORS and (e - s) / (view["t1"] - view["t0"]) * width > 4:
            assert pixel(page, "#tl-head", px, 20 + 18 + 16) == rgb(PHASE_COLORS[phase]), phase
    shot(page, "v100")
    assert not errors
    page.close()


def test_zooming_to_a_step_and_clicking_a_convolution_shows_its_kernels(server, browser, raw):
    meta = timeline(server, "meta")
    conv, kernels = _first_convolution(raw)
    page, errors = open_timeline(browser, server, V100)
    head = page.query_selector("#tl-head").bounding_box()
    step = next(
        s
        for s in meta["steps"]
        if s[0] / 1000 + meta["origin_ns"] / 1000
        <= conv["ts"]
        <= s[1] / 1000 + meta["origin_ns"] / 1000
    )
    box = next(
        b for b in page.evaluate("window.perfkitTimeline.state.stepBoxes") if round(b[2]) == step[0]
    )
    before = frames(page)
    page.mouse.click(head["x"] + (max(box[0], 0) + box[1]) / 2, head["y"] + 20 + 9)
    wait_frame(page, before)
    view = page.evaluate("window.perfkitTimeline.view()")
    assert view["t0"] <= step[0] and view["t1"] >= step[1]
    assert (view["t1"] - view["t0"]) < (step[1] - step[0]) * 1.1
    # zoom further with the keys until the convolution is wide enough to click
    target = (conv["ts"] * 1000 - meta["origin_ns"], conv["dur"] * 1000)
    for _ in range(40):
        spot = page.evaluate(
            "([s, d]) => window.perfkitTimeline.place({lane: 0, row: 0, folded_row: 0, start_ns: s, dur_ns: d})",
            list(target),
        )
        if spot["x1"] - spot["x0"] > 12:
            break
        centre = page.evaluate("window.perfkitTimeline.view()")
        mid = (centre["t0"] + centre["t1"]) / 2
        before = frames(page)
        page.keyboard.press("d" if target[0] > mid else "a") if abs(target[0] - mid) > (
            centre["t1"] - centre["t0"]
        ) / 4 else page.keyboard.press("w")
        wait_frame(page, before)
    state = page.evaluate(
        "() => { const s = window.perfkitTimeline.state; const out = [];"
        " for (const l of s.data.lanes) for (let i = 0; i < l.events.length; i += 6)"
        "   if (s.names[l.events[i + 4]] === 'aten::cudnn_convolution') out.push({lane: l.lane, row: l.events[i + 2], start_ns: l.events[i], dur_ns: l.events[i + 1], folded_row: 0});"
        " return out; }"
    )
    hit = min(state, key=lambda it: abs(it["start_ns"] - target[0]))
    assert hit["start_ns"] == target[0]
    spot = page.evaluate("(it) => window.perfkitTimeline.place(it)", hit)
    canvas = page.query_selector("#tl-body").bounding_box()
    page.mouse.click(
        canvas["x"] + (max(spot["x0"], 0) + spot["x1"]) / 2, canvas["y"] + spot["y"] + 6
    )
    page.wait_for_selector("#tl-launched li")
    assert page.inner_text("#tl-detail h2") == "aten::cudnn_convolution"
    shown = page.eval_on_selector_all(
        "#tl-launched li .tl-link", "ls => ls.map(l => l.textContent)"
    )
    assert shown == [k["name"] for k in kernels]
    # the kernels it launched are outlined in the link colour on the GPU lane
    page.wait_for_timeout(200)
    links = page.evaluate("window.perfkitTimeline.state.links")
    outlined = 0
    for k in links:
        p = page.evaluate("(it) => window.perfkitTimeline.place(it)", k)
        if 0 <= p["x0"] <= canvas["width"]:
            outlined += pixel(page, "#tl-body", p["x0"] - 1, p["y"] + 4) == LINK
    assert outlined >= 1
    shot(page, "conv")
    assert not errors
    page.close()


def test_folding_a_thread_hides_its_framework_level_rows(server, browser, logdir):
    run = demo_run(logdir)
    meta = timeline(server, "meta", run=run)
    lane = meta["lanes"][0]
    assert lane["folded_rows"] < lane["rows"]
    page, errors = open_timeline(browser, server, run)
    kinds = page.evaluate(
        "() => { const s = window.perfkitTimeline.state; const k = new Set();"
        " for (let i = 5; i < s.data.lanes[0].events.length; i += 6) k.add(s.meta.kinds[s.data.lanes[0].events[i]]); return [...k]; }"
    )
    assert "operator" in kinds
    assert page.get_attribute('.tl-lane[data-lane="0"]', "data-rows") == str(lane["rows"])
    before = frames(page)
    page.click('.tl-fold[data-lane="0"]')
    wait_frame(page, before)
    assert page.get_attribute('.tl-lane[data-lane="0"]', "data-rows") == str(lane["folded_rows"])
    kinds = page.evaluate(
        "() => { const s = window.perfkitTimeline.state; const k = new Set();"
        " for (let i = 5; i < s.data.lanes[0].events.length; i += 6) k.add(s.meta.kinds[s.data.lanes[0].events[i]]); return [...k]; }"
    )
    assert kinds and set(kinds) <= {
        "python",
        "user",
        "dataloader",
        "forward",
        "backward",
        "optimizer",
    }
    shot(page, "folded")
    before = frames(page)
    page.click('.tl-fold[data-lane="0"]')
    wait_frame(page, before)
    assert page.get_attribute('.tl-lane[data-lane="0"]', "data-rows") == str(lane["rows"])
    assert not errors
    page.close()


def test_a_search_finds_and_selects_cudnn_convolution(server, browser, raw):
    total = sum(1 for e in raw if e.get("ph") == "X" and "aten::cudnn_convolution" in e["name"])
    page, errors = open_timeline(browser, server, V100)
    page.fill("#tl-search", "aten::cudnn_convolution")
    page.press("#tl-search", "Enter")
    page.wait_for_selector("#tl-detail[data-event]")
    assert page.get_attribute("#tl-matches", "data-total") == str(total)
    assert page.inner_text("#tl-detail h2") == "aten::cudnn_convolution"
    page.click("#tl-next")
    wait_until(page, "window.perfkitTimeline.state.matchAt === 1")
    shot(page, "search")
    assert not errors
    page.close()


def test_keys_and_the_wheel_zoom_and_pan(server, browser):
    page, errors = open_timeline(browser, server, V100)
    first = page.evaluate("window.perfkitTimeline.view()")
    before = frames(page)
    page.keyboard.press("w")
    wait_frame(page, before)
    zoomed = page.evaluate("window.perfkitTimeline.view()")
    assert zoomed["t1"] - zoomed["t0"] == pytest.approx((first["t1"] - first["t0"]) * 0.8)
    before = frames(page)
    page.keyboard.press("d")
    wait_frame(page, before)
    panned = page.evaluate("window.perfkitTimeline.view()")
    assert panned["t0"] > zoomed["t0"] and panned["t1"] - panned["t0"] == pytest.approx(
        zoomed["t1"] - zoomed["t0"]
    )
    body = page.query_selector("#tl-body").bounding_box()
    page.mouse.move(body["x"] + 100, body["y"] + 10)
    before = frames(page)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -300)
    page.keyboard.up("Control")
    wait_frame(page, before)
    wheeled = page.evaluate("window.perfkitTimeline.view()")
    assert wheeled["t1"] - wheeled["t0"] < panned["t1"] - panned["t0"]
    assert not errors
    page.close()
