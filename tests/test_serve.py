"""``perfkit serve``: the real server on a free port over a folder of real runs (torch and Paddle
demo runs, the shared GPU traces, a corrupt file, a trace whose op names hold markup), driven
through its JSON API and in real headless Chromium (Playwright on the system ``chromium``).

Set ``PERFKIT_SCREENSHOTS`` to a folder to keep a full-page screenshot of the list, each tab of
the V100 ResNet-50 run and the diff.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import settle, shared_trace
from perfkit_core.report.format import format_value

pytest.importorskip("flask", reason="perfkit serve needs Flask (a perfkit requirement)")

XSS_SCRIPT = "<script>window.pwned=1</script>"
XSS_IMG = '<img src=x onerror="window.pwned=2">'
V100 = "gpu/resnet50_v100_num_workers_0.pt.trace.json.gz"
V100_NW4 = "gpu/resnet50_v100_num_workers_4.pt.trace.json.gz"
A100 = "a100/a100_8gpu_rank3.json.gz"


def _markup_trace(source: Path, target: Path) -> None:
    """A copy of a torch trace whose first two ops are named with markup."""
    trace = json.loads(source.read_text())
    renamed = 0
    for event in trace["traceEvents"]:
        if event.get("cat") == "cpu_op" and renamed < 2:
            event["name"] = XSS_SCRIPT if renamed == 0 else XSS_IMG
            renamed += 1
    target.write_text(json.dumps(trace))


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("logdir")
    (root / "gpu").mkdir()
    for key, name in (("resnet_nw0", V100), ("resnet_nw4", V100_NW4), ("a100_rank3", A100)):
        (root / name).parent.mkdir(exist_ok=True)
        shutil.copy(shared_trace(key), root / name)
    import torch_profiles

    torch_run = torch_profiles.record(root / "demo" / "torch", steps=4).runs[0]
    (root / "xss").mkdir()
    _markup_trace(torch_run / "trace.pt.trace.json", root / "xss" / "markup.pt.trace.json")
    try:
        import paddle_profiles

        paddle_profiles.record(root / "demo" / "paddle", steps=4)
    except ImportError:
        pass
    try:
        import jax  # noqa: F401
    except ImportError:
        pass
    else:
        from perfkit_xla.demo import train_mlp

        train_mlp(root / "demo" / "xla", steps=4)
    (root / "corrupt.json").write_text('{"traceEvents": [{"name": "a", "ph"')
    settle(root)
    return root


@pytest.fixture(scope="module")
def server(logdir):
    """The app on a real server (werkzeug's threaded server, as ``perfkit serve`` runs it)."""
    from werkzeug.serving import make_server

    from perfkit_core.serve import create_app

    httpd = make_server("127.0.0.1", 0, create_app(logdir, workers=2), threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.port}"
    httpd.shutdown()


def get(url: str) -> tuple[int, bytes]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=600) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def api(server: str, path: str) -> object:
    status, body = get(server + path)
    assert status == 200, (path, status, body[:300])
    return json.loads(body)


def listed(server: str, *, settled: bool = True, timeout: float = 600) -> dict[str, dict]:
    """The list, once every ready run's analysis has finished (``settled``)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = {r["id"]: r for r in api(server, "/api/runs")["runs"]}
        running = [r for r in runs.values() if r["analysis"] == "running"]
        if not settled or not running or time.monotonic() > deadline:
            return runs
        time.sleep(0.5)


def run_dirs(logdir: Path, framework: str) -> list[str]:
    return sorted(
        p.parent.relative_to(logdir).as_posix()
        for p in (logdir / "demo" / framework).rglob("meta.json")
    )


def test_the_list_holds_every_run_and_the_corrupt_file_says_why(server, logdir):
    runs = listed(server)
    expected = {V100, V100_NW4, A100, "xss/markup.pt.trace.json", "corrupt.json"}
    for framework in ("torch", "paddle", "xla"):
        expected |= set(run_dirs(logdir, framework))
    assert expected <= set(runs), sorted(runs)
    bad = runs["corrupt.json"]
    assert bad["status"] == "error"
    assert bad["error"].startswith("corrupt.json: ") and "\n" not in bad["error"]
    assert str(logdir) not in bad["error"]
    v100 = runs[V100]
    assert v100["framework"] == "torch" and v100["kind"] == "trace"
    document = api(server, "/api/runs/" + V100)
    items = {i["label"]: i["value"] for i in document["headline"]["items"]}
    assert v100["step_ns"] == items["Step time (mean)"]
    torch_run = runs[run_dirs(logdir, "torch")[0]]
    assert torch_run["steps"] == 4 and torch_run["framework"] == "torch"
    # every other run still opens
    status, _ = get(server + "/api/runs/corrupt.json")
    assert status == 422
    assert api(server, "/api/runs/" + A100)["headline"]


def test_every_runs_timeline_draws_and_the_corrupt_file_says_why(server, logdir):
    """The timeline's lanes and a whole-profile slice of each run of every framework here."""
    runs = listed(server)
    drawn = 0
    for run_id, row in runs.items():
        status, body = get(f"{server}/api/timeline/meta?run={run_id}")
        if row["status"] == "error":
            assert status == 422 and json.loads(body)["error"], run_id
            continue
        assert status == 200, (run_id, body[:300])
        meta = json.loads(body)
        assert meta["lanes"], run_id
        found = api(
            server,
            f"/api/timeline/slice?run={run_id}&t0=0&t1={meta['span_ns']}&px={max(meta['span_ns'] / 1000, 1)}",
        )
        assert any(lane["events"] or lane["merged"] for lane in found["lanes"]), run_id
        drawn += 1
    assert drawn >= 4


def test_a_runs_json_is_the_report_the_command_line_prints(server, logdir):
    cli = subprocess.run(
        [sys.executable, "-m", "perfkit_core", "report", str(logdir / V100), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    status, body = get(server + "/api/runs/" + V100)
    assert status == 200 and body.decode() == cli.stdout
    layers = api(server, "/api/runs/" + V100 + "?views=model,kernel")
    assert set(layers["tables"]) == {"model", "kernel"}


def test_the_diff_is_the_comparison_the_command_line_prints(server, logdir):
    a, b = V100, V100_NW4
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "perfkit_core",
            "compare",
            str(logdir / a),
            str(logdir / b),
            "--labels",
            f"{Path(a).name},{Path(b).name}",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    status, body = get(server + f"/api/compare?a={a}&b={b}")
    assert status == 200 and body.decode() == cli.stdout


def test_nothing_outside_the_folder_is_served(server, logdir, tmp_path):
    outside = tmp_path / "secret.json"
    outside.write_text('{"traceEvents": []}')
    (logdir / "link.json").symlink_to(outside)
    (logdir / "linkdir").symlink_to(tmp_path, target_is_directory=True)
    try:
        for path in (
            "/api/runs/../../etc/passwd",
            "/api/runs/%2e%2e/%2e%2e/etc/passwd",
            "/api/runs//etc/passwd",
            "/api/runs/%2Fetc%2Fpasswd",
            "/api/runs/link.json",
            "/api/runs/linkdir/secret.json",
            "/run/..%2F..%2Fetc",
            "/files/report/..%2Fsecret.json",
            "/files/trace//etc/passwd",
            "/api/compare?a=../x&b=/etc/passwd",
            "/assets/../app.py",
        ):
            assert get(server + path)[0] == 404, path
        assert "link.json" not in listed(server, settled=False)
    finally:
        (logdir / "link.json").unlink()
        (logdir / "linkdir").unlink()


def test_no_endpoint_writes(server):
    import urllib.request

    for method in ("POST", "PUT", "DELETE", "PATCH"):
        request = urllib.request.Request(server + "/api/runs/" + V100, method=method, data=b"{}")
        try:
            urllib.request.urlopen(request, timeout=30)
        except urllib.error.HTTPError as exc:
            assert exc.code == 405, method
        else:
            raise AssertionError(f"{method} was accepted")


def test_a_run_being_written_shows_in_progress_then_ready(server, logdir):
    from perfkit_core import load

    folder = logdir / "live"
    folder.mkdir()
    half = folder / "half"
    half.mkdir()
    source = logdir / run_dirs(logdir, "torch")[0]
    shutil.copy(source / "events.parquet", half / "events.parquet")  # no meta.json yet
    (folder / ".late.pt.trace.json.0a1b.tmp").write_text("{")  # an atomic write under way
    time.sleep(1.1)
    runs = listed(server, settled=False)
    assert runs["live/half"]["status"] == "in progress"
    assert runs["live/late.pt.trace.json"]["status"] == "in progress"
    shutil.copy(source / "meta.json", half / "meta.json")
    (folder / ".late.pt.trace.json.0a1b.tmp").unlink()
    time.sleep(1.1)
    runs = listed(server)
    assert runs["live/half"]["status"] == "ready"
    assert runs["live/half"]["steps"] == len(load(source).meta["steps"])
    assert "live/late.pt.trace.json" not in runs
    shutil.rmtree(folder)


def test_the_lru_keeps_its_bounds_and_makes_each_entry_once():
    from perfkit_core.serve.analysis import LRU

    cache = LRU(3, max_bytes=100)
    for i in range(5):
        cache.put(i, str(i), 10)
    assert len(cache) == 3 and cache.get(0) is None and cache.get(4) == "4"
    cache.put("big", "x", 95)
    assert len(cache) == 1 and cache.bytes() == 95
    made = []

    def make():
        time.sleep(0.2)
        made.append(1)
        return "v"

    threads = [threading.Thread(target=cache.get_or_make, args=("k", make)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [1] and cache.get("k") == "v"


def test_a_rewritten_run_is_analysed_again(server, logdir):
    folder = logdir / "rewrite"
    folder.mkdir()
    target = folder / "run.pt.trace.json.gz"
    shutil.copy(logdir / V100, target)
    old = os.stat(target).st_mtime - 10
    os.utime(target, (old, old))
    first = api(server, "/api/runs/rewrite/run.pt.trace.json.gz")
    with gzip.open(logdir / A100) as fh:
        target.write_bytes(gzip.compress(fh.read()))
    os.utime(target, (old + 5, old + 5))
    # a file that changed since the last listing is in progress until a listing finds it settled
    deadline = time.monotonic() + 30
    while listed(server, settled=False)["rewrite/run.pt.trace.json.gz"]["status"] != "ready":
        assert time.monotonic() < deadline
        time.sleep(0.5)
    second = api(server, "/api/runs/rewrite/run.pt.trace.json.gz")
    assert first["headline"]["items"] != second["headline"]["items"]
    shutil.rmtree(folder)


# ---- in the browser ----


def shot(page, name: str) -> None:
    folder = os.environ.get("PERFKIT_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"serve-{name}.png"), full_page=True)


def test_the_list_page_shows_every_run_and_a_new_one_without_a_reload(server, logdir, browser):
    runs = listed(server)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(server + "/")
    page.wait_for_selector(f'tr[data-run="{V100}"]')
    shown = set(page.eval_on_selector_all("tr[data-run]", "rows => rows.map(r => r.dataset.run)"))
    assert set(runs) <= shown
    assert "error" in page.inner_text('tr[data-run="corrupt.json"]')
    shot(page, "list")
    new = logdir / "later" / "run.pt.trace.json.gz"
    new.parent.mkdir()
    shutil.copy(logdir / V100_NW4, new)
    old = time.time() - 10
    os.utime(new, (old, old))
    page.wait_for_selector('tr[data-run="later/run.pt.trace.json.gz"]', timeout=30_000)
    page.close()
    shutil.rmtree(new.parent)


def _cells(page, table: str, key: str) -> list[str]:
    return page.eval_on_selector_all(
        f'section[data-table="{table}"] td[data-key="{key}"]',
        "cells => cells.map(c => c.textContent)",
    )


def test_each_tab_of_the_v100_run_shows_the_reports_figures(server, browser):
    document = api(server, "/api/runs/" + V100)
    unit = document["time_unit"]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{server}/run/{V100}")
    page.wait_for_selector("#headline")
    for item in document["headline"]["items"]:
        shown = page.inner_text(f'#headline div[data-label="{item["label"]}"] b')
        assert shown == format_value(item["value"], item["unit"], unit), item["label"]
    assert page.query_selector("#stepbar") is not None
    assert page.query_selector_all("#advice .finding details")
    shot(page, "overview")
    tabs = {
        "operators": ("operator", "cpu_total_ns"),
        "kernels": ("kernel", "gpu_total_ns"),
        "memory": ("memory", "allocated_bytes"),
        "roofline": ("roofline", None),
        "input": ("benchmark", None),
        "layers": (None, None),
        "distributed": (None, None),
        "code": (None, None),
    }
    for tab, (table, key) in tabs.items():
        page.click(f'button[data-tab="{tab}"]')
        page.wait_for_selector(f'#tab[data-shown="{tab}"]', timeout=600_000)
        assert not page.query_selector("#tab .error"), page.inner_text("#tab")
        if table and table in document["tables"] and key:
            rows = document["tables"][table]["rows"]
            column = next(c for c in document["tables"][table]["columns"] if c["key"] == key)
            expected = [format_value(r[key], column["unit"], unit) for r in rows]
            assert sorted(_cells(page, table, key)) == sorted(expected), tab
        shot(page, tab)
    page.close()


def test_op_names_with_markup_show_as_text(server, browser):
    page = browser.new_page()
    page.goto(f"{server}/run/xss/markup.pt.trace.json#tab=operators")
    page.wait_for_selector('#tab[data-shown="operators"]', timeout=600_000)
    text = page.inner_text("#tab")
    assert XSS_SCRIPT in text or "window.pwned" in text
    assert page.evaluate("window.pwned") is None
    assert not page.query_selector("#tab img")
    assert not page.query_selector("#tab script")
    page.close()


def test_the_diff_of_the_torch_and_paddle_demo_runs_shows_the_verdict(server, logdir, browser):
    torch_runs, paddle_runs = run_dirs(logdir, "torch"), run_dirs(logdir, "paddle")
    if not paddle_runs:
        pytest.skip("paddle is not installed")
    a, b = torch_runs[0], paddle_runs[0]
    document = api(server, f"/api/compare?a={a}&b={b}")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{server}/compare?a={a}&b={b}")
    page.wait_for_selector("#verdict li", timeout=600_000)
    lines = page.eval_on_selector_all("#verdict li", "items => items.map(i => i.textContent)")
    assert lines == document["verdict"]["lines"]
    shot(page, "diff")
    page.click("#swap")
    page.wait_for_url(f"**/compare?a={b.replace('/', '%2F')}&b={a.replace('/', '%2F')}")
    page.wait_for_selector("#verdict li", timeout=600_000)
    page.close()


def test_the_trend_of_a_folder_gates_each_run_against_the_one_before(server, logdir, browser):
    from perfkit_core.comparison import compare

    trend = api(server, "/api/trend?folder=gpu")
    ids = [r["id"] for r in trend["runs"]]
    assert set(ids) == {V100, V100_NW4}
    (step,) = trend["steps"]
    expected = compare(logdir / step["a"], logdir / step["b"]).gate(5.0, "step_time")
    assert step["gate"]["regressed"] == expected.regressed
    for run in trend["runs"]:
        document = api(server, "/api/runs/" + run["id"])
        phases = {p["name"]: p["per_step_ns"] for p in document["headline"]["phases"]}
        assert run["phases"] == phases
    assert get(server + "/api/trend?folder=../..")[0] == 404
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{server}/trend?folder=gpu")
    page.wait_for_selector("#trend td.gate a")
    verdict = page.inner_text("#trend td.gate a")
    assert verdict == ("regression" if expected.regressed else "ok")
    shot(page, "trend")
    page.click("#trend td.gate a")
    page.wait_for_selector("#verdict li", timeout=600_000)
    page.close()


def test_the_layer_tree_folds(server, logdir, browser):
    run = run_dirs(logdir, "torch")[0]
    document = api(server, f"/api/runs/{run}?views=layers")
    depths = [r["depth"] for r in document["tables"]["layers"]["rows"]]
    assert max(depths) > 1
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{server}/run/{run}#tab=layers")
    page.wait_for_selector('section[data-table="layers"] button.fold')
    visible = 'section[data-table="layers"] tbody tr:not([hidden])'
    before = len(page.query_selector_all(visible))
    assert before == len(depths)
    shot(page, "layers-tree")
    page.click('section[data-table="layers"] button.fold')  # the outermost layer
    assert len(page.query_selector_all(visible)) < before
    shot(page, "layers-folded")
    page.click('section[data-table="layers"] button.fold')
    assert len(page.query_selector_all(visible)) == before
    page.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_the_command_serves_the_folder_and_warns_off_localhost(logdir, host):
    from perfkit_core.cli.serve import free_port

    port = free_port("127.0.0.1", 0)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "perfkit_core",
            "serve",
            str(logdir),
            "--host",
            host,
            "--port",
            str(port),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                status, body = get(f"http://127.0.0.1:{port}/api/runs")
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.3)
        assert status == 200 and V100 in {r["id"] for r in json.loads(body)["runs"]}
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1].startswith(f"perfkit: serving {logdir}"), err
    warned = any(line.startswith("perfkit: warning: serving on 0.0.0.0") for line in lines)
    assert warned == (host != "127.0.0.1")
    assert len(lines) == (1 if host == "127.0.0.1" else 2), err


def test_the_first_open_prepares_the_other_tabs(logdir):
    from perfkit_core.serve import create_app
    from perfkit_core.serve.app import TAB_QUERIES

    app = create_app(logdir)
    analyses = app.config["PERFKIT_SERVER"].analyses
    client = app.test_client()
    assert client.get("/api/runs/" + V100).status_code == 200
    entry = app.config["PERFKIT_SERVER"].entry(V100)
    deadline = time.monotonic() + 300
    keys = [(analyses.key(entry), views, requested) for views, requested in TAB_QUERIES]
    while any(analyses.reports.get(k) is None for k in keys):
        assert time.monotonic() < deadline, "the tabs were not prepared"
        time.sleep(0.2)
    # what the page then asks for is what was prepared
    layers = client.get("/api/runs/" + V100 + "?views=layers")
    assert layers.get_data(as_text=True) == analyses.reports.get(keys[0]).text
    shape = client.get("/api/runs/" + V100 + "?views=family,operator,user&group=shape")
    assert shape.get_data(as_text=True) == analyses.reports.get(keys[2]).text
    analyses.close()


PERFETTO_STUB = """<!DOCTYPE html><title>stub</title><script>
// speaks Perfetto's deep-linking protocol: PONG to PING, then keeps what it was sent
window.addEventListener("message", (event) => {
  if (event.data === "PING") { event.source.postMessage("PONG", "*"); return; }
  const sent = event.data && event.data.perfetto;
  if (sent) {
    const head = new TextDecoder().decode(new Uint8Array(sent.buffer).slice(0, 200));
    window.received = { title: sent.title, bytes: sent.buffer.byteLength, head, fileName: sent.fileName };
  }
});
</script>"""


def test_open_in_perfetto_posts_the_trace_to_a_page_that_speaks_its_protocol(logdir, browser):
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from werkzeug.serving import make_server

    from perfkit_core.serve import create_app

    class Stub(BaseHTTPRequestHandler):
        def do_GET(self):
            body = PERFETTO_STUB.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    stub = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    stub_url = f"http://localhost:{stub.server_address[1]}/"  # another origin than the app's
    httpd = make_server("127.0.0.1", 0, create_app(logdir, perfetto_ui=stub_url), threaded=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.port}"
    try:
        _, trace = get(f"{url}/files/trace/{V100}")
        page = browser.new_page()
        page.goto(f"{url}/run/{V100}")
        page.wait_for_selector("#headline", timeout=600_000)
        with page.expect_popup() as popup:
            page.click("#perfetto")
        opened = popup.value
        opened.wait_for_function("window.received !== undefined", timeout=120_000)
        received = opened.evaluate("window.received")
        assert received["title"] == V100
        assert received["bytes"] == len(trace)
        assert received["head"] == trace[:200].decode()
        assert received["fileName"] == Path(V100).name + ".trace.json"
        page.close()
    finally:
        httpd.shutdown()
        stub.shutdown()


def test_a_folder_of_rank_traces_is_one_job_with_its_ranks_and_collectives(tmp_path):
    from perfkit_core.serve import create_app

    job = tmp_path / "logdir" / "job"
    job.mkdir(parents=True)
    for key in ("a100_rank3", "v100_rank1"):
        shutil.copy(shared_trace(key), job)
    old = time.time() - 60
    for f in job.iterdir():
        os.utime(f, (old, old))
    app = create_app(tmp_path / "logdir")
    client = app.test_client()
    (row,) = client.get("/api/runs").get_json()["runs"]
    assert (row["id"], row["kind"], row["status"]) == ("job", "job", "ready")
    document = client.get("/api/runs/job").get_json()
    assert {"ranks", "collectives"} <= set(document["tables"])
    ranks = [r["rank"] for r in document["tables"]["ranks"]["rows"] if "rank" in r]
    assert sorted(ranks) == [1, 3]
    # its timeline is one rank's at a time: the first by default, any other by ``rank``
    for asked, rank in ((None, 1), (3, 3)):
        query = "" if asked is None else f"&rank={asked}"
        meta = client.get(f"/api/timeline/meta?run=job{query}").get_json()
        assert (meta["job_ranks"], meta["rank"]) == ([1, 3], rank)
        assert any(lane["kind"] == "stream" for lane in meta["lanes"])
    refused = client.get("/api/timeline/meta?run=job&rank=5")
    assert refused.status_code == 422 and "no rank 5" in refused.get_json()["error"]
    app.config["PERFKIT_SERVER"].analyses.close()


def test_operators_group_by_input_shape(server, browser):
    document = api(server, f"/api/runs/{V100}?views=family,operator,user&group=shape")
    rows = document["tables"]["operator"]["rows"]
    assert any(r.get("input_shapes") for r in rows)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{server}/run/{V100}#tab=operators")
    page.wait_for_selector('#tab[data-shown="operators"] section[data-table="operator"]')
    page.select_option("#group", "shape")
    page.wait_for_selector(
        'section[data-table="operator"] td[data-key="input_shapes"]', timeout=600_000
    )
    shown = _cells(page, "operator", "input_shapes")
    column = next(
        c for c in document["tables"]["operator"]["columns"] if c["key"] == "input_shapes"
    )
    assert sorted(shown) == sorted(format_value(r["input_shapes"], column["unit"]) for r in rows)
    page.close()


def test_a_listing_reads_each_traces_first_bytes_once(tmp_path, monkeypatch):
    from perfkit_core.serve import catalog

    folder = tmp_path / "logdir"
    folder.mkdir()
    trace = folder / "run.pt.trace.json.gz"
    shutil.copy(shared_trace("resnet_nw0"), trace)
    old = time.time() - 60
    os.utime(trace, (old, old))
    reads = []
    real = catalog._framework_of
    monkeypatch.setattr(catalog, "_framework_of", lambda pm, p: reads.append(p) or real(pm, p))
    listing = catalog.Catalog(folder)
    for _ in range(3):
        (entry,) = listing.scan()
        assert entry.framework == "torch" and entry.status == "ready"
    assert reads == [trace]
    os.utime(trace, (old + 1, old + 1))  # rewritten: in progress once, then read again
    assert listing.scan()[0].status == "in progress"
    assert listing.scan()[0].framework == "torch"
    assert reads == [trace, trace]


def test_a_run_queued_for_the_helper_is_listed_once_and_reads_with_its_metadata(tmp_path):
    """A handler's run folder whose conversion is queued (its trace and the helper's note): one
    run in the list, ready while its program still trains and read with the metadata the
    handler gave it; in progress while the helper finishes it after its program exited."""
    import subprocess as sp

    from test_background import _gone_pid

    from perfkit_core.events import pending
    from perfkit_core.serve import create_app

    logdir = tmp_path / "logdir"
    run_dir = logdir / "host_1.step7"
    run_dir.mkdir(parents=True)
    trace = run_dir / "trace.pt.trace.json.gz"
    shutil.copy(shared_trace("resnet_nw0"), trace)
    meta = {"framework": "torch", "host": "trainer-7", "extra": {"worker_name": "w7"}}
    pending.write_note(run_dir, trace, meta, keep_trace=False, helper_pid=os.getpid())
    app = create_app(logdir)
    client = app.test_client()
    (row,) = client.get("/api/runs").get_json()["runs"]
    assert (row["id"], row["kind"], row["status"]) == ("host_1.step7", "run", "ready")
    assert (row["framework"], row["host"]) == ("torch", "trainer-7")
    document = client.get("/api/runs/host_1.step7").get_json()
    assert document["tables"]  # read from the trace, with the note's metadata
    app.config["PERFKIT_SERVER"].analyses.close()
    # the program exited and a live helper finishes the run: in progress
    helper = sp.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pending.write_note(
            run_dir, trace, meta, keep_trace=False, helper_pid=helper.pid, program=_gone_pid()
        )
        from perfkit_core.serve.catalog import Catalog

        (entry,) = Catalog(logdir).scan()
        assert (entry.kind, entry.status) == ("run", "in progress")
    finally:
        helper.kill()
        helper.wait()
