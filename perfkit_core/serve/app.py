"""``perfkit serve``'s web app: a Flask (WSGI) app over a log folder.

Pages: ``/`` (the training list), ``/run/<id>`` (a run's tabs), ``/compare?a=<id>&b=<id>`` (the
diff of two runs), ``/trend?folder=<folder>`` (a folder's runs over time). The pages draw what the JSON API returns, which scripts can use too:

- ``GET /api/runs``: the list (id, name, folder, kind, framework, host, date, status, steps,
  step time, the change worth most, an error when the run cannot be read);
- ``GET /api/runs/<id>``: the run's report JSON, the document ``perfkit report --format json``
  prints with its default options (``?views=a,b`` as its ``--views``; ``?group=shape`` or
  ``?group=stack`` groups the operator view by input shape or by call stack);
- ``GET /api/compare?a=<id>&b=<id>``: the comparison JSON (``perfkit compare A B --format
  json``), ``a`` the baseline;
- ``GET /api/trend?folder=<folder>``: the runs of one folder in time order (step time and its
  phases) and the regression gate's verdict between each two consecutive runs
  (``?fail_pct=``, default 5);
- ``GET /api/timeline/<part>?run=<id>``: the Timeline tab's data (``serve.timeline``): ``meta``
  (lanes, step and phase bands), ``slice`` (``t0``, ``t1``, ``px``: what a window shows at
  ``px`` ns to the pixel; ``fold``: the threads folded), ``event`` (``id``: one event, its
  columns and launch links) and ``search`` (``q``); of a job, ``&rank=`` picks the rank
  (else its first).

Also ``/files/report/<id>`` (the run's HTML report) and ``/files/trace/<id>`` (its chrome
trace, ``perfkit export --to chrome``). Nothing outside the log folder is served (404), and no
endpoint writes, deletes or runs anything. Being WSGI, the app mounts inside TensorBoard as a
plugin; the pages poll rather than hold a connection open.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

from perfkit_core.serve.analysis import Analyses
from perfkit_core.serve.catalog import Catalog, Entry, NotInLogdir, resolve

#: A listing is reused for this long (the list page polls every 2 s).
LISTING_TTL_S = 1.0
#: Operator grouping of the Operators tab: ``?group=`` -> the report's options.
GROUPS_SHAPE: dict[str, Any] = {"group_by_input_shape": True}
GROUPS_STACK: dict[str, Any] = {"group_by_stack_n": 5}
GROUPS: dict[str, dict[str, Any]] = {"name": {}, "shape": GROUPS_SHAPE, "stack": GROUPS_STACK}
#: The reports of the tabs a run page opens after the first (the page asks for the same):
#: (views, options) as ``Analyses.report`` takes them.
TAB_QUERIES: list[tuple[tuple[str, ...], tuple[Any, ...]]] = [
    (("layers",), ()),
    (("code",), ()),
    (("family", "operator", "user"), tuple(sorted(GROUPS_SHAPE.items()))),
    (("family", "operator", "user"), tuple(sorted(GROUPS_STACK.items()))),
]
#: The regression gate's threshold between consecutive runs of the trend (% of step time).
TREND_FAIL_PCT = 5.0
#: The pages' content security policy: scripts, styles and data from this server alone (styles
#: set by the scripts inline: bar widths; blob: for the CSV downloads).
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; object-src 'none'; base-uri 'self'"
)

ASSETS = Path(__file__).parent / "assets"
REPORT_ASSETS = Path(__file__).parent.parent / "report" / "assets"


class Server:
    """The state behind the app: the catalog of ``logdir``, its last listing and the runs'
    analyses."""

    def __init__(self, logdir: str | Path, *, workers: int = 1) -> None:
        self.catalog = Catalog(logdir)
        self.analyses = Analyses(workers=workers)
        self._listing: tuple[float, dict[str, Entry]] = (0.0, {})
        self._lock = threading.Lock()

    def listing(self, *, fresh: bool = False) -> dict[str, Entry]:
        with self._lock:
            when, entries = self._listing
            if fresh or time.monotonic() - when > LISTING_TTL_S:
                entries = {e.id: e for e in self.catalog.scan()}
                self._listing = (time.monotonic(), entries)
            return entries

    def entry(self, run_id: str) -> Entry:
        """The listed run ``run_id``; ``NotInLogdir`` when it names nothing listed."""
        resolve(self.catalog.root, run_id)
        found = self.listing().get(run_id) or self.listing(fresh=True).get(run_id)
        if found is None:
            raise NotInLogdir(run_id)
        return found

    def runs(self) -> list[dict[str, Any]]:
        out = []
        for entry in self.listing().values():
            row = entry.to_dict()
            row.update({"step_ns": None, "change_first": None, "analysis": None})
            if entry.status == "ready":
                figures = self.analyses.summary(entry)
                if figures is None:
                    row["analysis"] = "running"
                elif "error" in figures:
                    row["status"], row["error"] = "error", figures["error"]
                else:
                    row["analysis"] = "done"
                    row.update({k: v for k, v in figures.items() if v is not None})
            out.append(row)
        return out


def _number(text: str | None, name: str) -> float:
    """``text`` as a finite number, or a ValueError that names the parameter."""
    import math

    try:
        value = float(text if text is not None else "")
    except ValueError:
        raise ValueError(f"{name} must be a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number")
    return value


#: Where "Open in Perfetto" sends a run's trace (its documented postMessage protocol).
PERFETTO_UI = "https://ui.perfetto.dev"


def create_app(logdir: str | Path, *, workers: int = 1, perfetto_ui: str = PERFETTO_UI) -> Any:
    """The Flask app of ``perfkit serve LOGDIR``; ``perfetto_ui`` is the Perfetto UI that "Open
    in Perfetto" opens (a local copy, or a page that speaks its protocol)."""
    from flask import Flask, Response, abort, request

    from perfkit_core.report.json import dumps

    server = Server(logdir, workers=workers)
    app = Flask("perfkit_serve", static_folder=None)
    app.config["PERFKIT_SERVER"] = server
    # ``//etc/passwd`` names an absolute path: refused (404), not redirected to another path
    app.url_map.merge_slashes = False

    def json_response(payload: Any, status: int = 200) -> Any:
        return Response(dumps(payload), status=status, mimetype="application/json")

    def entry_or_404(run_id: str) -> Entry:
        try:
            return server.entry(run_id)
        except NotInLogdir:
            abort(404)

    def error_json(entry: Entry, exc: Exception) -> Any:
        from perfkit_core.serve.analysis import _one_line

        return json_response({"error": _one_line(entry, exc), "id": entry.id}, 422)

    @app.get("/")
    @app.get("/runs")  # the same, at a path that a prefix route of TensorBoard's also reaches
    def list_page() -> Any:
        return page("list", "perfkit runs")

    @app.get("/run/<path:run_id>")
    def run_page(run_id: str) -> Any:
        entry = entry_or_404(run_id)
        return page("run", entry.name)

    @app.get("/compare")
    def compare_page() -> Any:
        return page("compare", "perfkit diff")

    @app.get("/assets/<name>")
    def asset(name: str) -> Any:
        files = {
            "serve.js": (ASSETS / "serve.js", "text/javascript"),
            "timeline.js": (ASSETS / "timeline.js", "text/javascript"),
            "serve.css": (ASSETS / "serve.css", "text/css"),
            "chart.umd.min.js": (REPORT_ASSETS / "chart.umd.min.js", "text/javascript"),
        }
        if name not in files:
            abort(404)
        path, mimetype = files[name]
        return Response(path.read_bytes(), mimetype=mimetype)

    @app.get("/api/runs")
    def api_runs() -> Any:
        return json_response({"logdir": str(server.catalog.root.name), "runs": server.runs()})

    @app.get("/api/runs/<path:run_id>")
    def api_run(run_id: str) -> Any:
        entry = entry_or_404(run_id)
        if entry.status == "in progress":
            return json_response({"error": "still being written", "id": entry.id}, 409)
        views = tuple(v.strip() for v in request.args.get("views", "").split(",") if v.strip())
        group = request.args.get("group", "name")
        if group not in GROUPS:
            return json_response({"error": f"group must be one of {', '.join(GROUPS)}"}, 400)
        requested = tuple(sorted(GROUPS[group].items()))
        try:
            document = server.analyses.report(entry, views, requested)
        except Exception as exc:  # a corrupt run: its one-line error, never a stopped server
            return error_json(entry, exc)
        if not views and not requested:  # the first open: the other tabs are made meanwhile
            server.analyses.prepare_timeline(entry)
            server.analyses.prepare(entry, TAB_QUERIES)
        return Response(document.text, mimetype="application/json")

    @app.get("/api/timeline/<part>")
    def api_timeline(part: str) -> Any:
        from perfkit_core.serve import timeline_events

        if part not in ("meta", "slice", "event", "search"):
            abort(404)
        entry = entry_or_404(request.args.get("run", ""))
        if entry.status == "in progress":
            return json_response({"error": "still being written", "id": entry.id}, 409)
        try:
            rank = int(_number(request.args["rank"], "rank")) if "rank" in request.args else None
            if part == "slice":
                window = [_number(request.args.get(k), k) for k in ("t0", "t1", "px")]
                fold = {int(x) for x in request.args.get("fold", "").split(",") if x.strip()}
            elif part == "event":
                row = int(_number(request.args.get("id"), "id"))
        except ValueError as exc:
            return json_response({"error": str(exc)}, 400)
        try:
            timeline = server.analyses.timeline(entry, rank)
        except Exception as exc:  # a corrupt run, or a job: its one-line error
            return error_json(entry, exc)
        if part == "meta":
            return json_response(timeline.meta())
        if part == "slice":  # numbers and names only: the standard library's encoder, compact
            import json

            t0, t1, px = window
            found = timeline.slice(int(t0), int(t1), px, fold)
            return Response(json.dumps(found, separators=(",", ":")), mimetype="application/json")
        if part == "event":
            try:
                return json_response(timeline_events.event_detail(timeline, row))
            except KeyError:
                return json_response({"error": f"{entry.id} draws no event {row}"}, 404)
        return json_response(timeline_events.search(timeline, request.args.get("q", "")))

    @app.get("/api/compare")
    def api_compare() -> Any:
        a = entry_or_404(request.args.get("a", ""))
        b = entry_or_404(request.args.get("b", ""))
        try:
            return Response(server.analyses.comparison(a, b).text, mimetype="application/json")
        except Exception as exc:  # the message names the file that failed, by its id
            return error_json(a, ValueError(str(exc).replace(str(b.path), b.id)))

    @app.get("/trend")
    def trend_page() -> Any:
        return page("trend", "perfkit trend")

    @app.get("/api/trend")
    def api_trend() -> Any:
        folder = request.args.get("folder", "")
        try:
            fail_pct = float(request.args.get("fail_pct", TREND_FAIL_PCT))
        except ValueError:
            return json_response({"error": "fail_pct must be a number"}, 400)
        if folder:
            try:
                resolve(server.catalog.root, folder)
            except NotInLogdir:
                abort(404)
        entries = sorted(
            (e for e in server.listing().values() if e.folder == folder and e.status == "ready"),
            key=lambda e: (e.mtime, e.id),
        )
        points: list[dict[str, Any]] = []
        for entry in entries:
            try:
                headline = server.analyses.report(entry).data().get("headline") or {}
            except Exception as exc:
                from perfkit_core.serve.analysis import _one_line

                points.append({"id": entry.id, "error": _one_line(entry, exc)})
                continue
            items = {i["label"]: i["value"] for i in headline.get("items") or []}
            points.append(
                {
                    "id": entry.id,
                    "date": entry.to_dict()["date"],
                    "step_ns": items.get("Step time (mean)"),
                    "phases": {p["name"]: p["per_step_ns"] for p in headline.get("phases") or []},
                }
            )
        good = [p for p in points if "error" not in p]
        steps = []
        for before, after in itertools.pairwise(good):
            try:
                gate = server.analyses.gate(
                    server.entry(before["id"]), server.entry(after["id"]), fail_pct
                )
            except Exception as exc:
                gate = {"error": " ".join(str(exc).split())}
            steps.append({"a": before["id"], "b": after["id"], "gate": gate})
        return json_response(
            {"folder": folder, "fail_pct": fail_pct, "runs": points, "steps": steps}
        )

    @app.get("/files/report/<path:run_id>")
    def html_report(run_id: str) -> Any:
        from perfkit_core.report.documents import report_of
        from perfkit_core.report.html import render_report_html

        entry = entry_or_404(run_id)
        try:
            model, _ = report_of(entry.path, source=server.analyses.source(entry))
        except Exception as exc:
            return error_json(entry, exc)
        return Response(render_report_html(model), mimetype="text/html")

    @app.get("/files/trace/<path:run_id>")
    def chrome_trace(run_id: str) -> Any:
        from perfkit_core.report.export import chrome_trace as make_trace

        entry = entry_or_404(run_id)
        try:
            source = server.analyses.source(entry)
            if getattr(source, "events", None) is None:
                return json_response({"error": "a job's trace is exported rank by rank"}, 422)
            payload = make_trace(source)
        except Exception as exc:
            return error_json(entry, exc)
        response = json_response(payload)
        name = entry.name.replace('"', "")
        response.headers["Content-Disposition"] = f'attachment; filename="{name}.trace.json"'
        return response

    @app.after_request
    def headers(response: Any) -> Any:
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        if response.mimetype == "text/html":
            # the pages run only their own scripts; a trace's strings are text, never markup
            response.headers["Content-Security-Policy"] = CSP
        return response

    def page(kind: str, title: str) -> Any:
        import jinja2

        html = (
            jinja2.Environment(autoescape=True)
            .from_string((ASSETS / "page.html.j2").read_text())
            .render(kind=kind, title=title, root=request.script_root, perfetto=perfetto_ui)
        )
        return Response(html, mimetype="text/html")

    return app
