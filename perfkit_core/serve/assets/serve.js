// perfkit serve: the pages draw what the JSON API returns. Every string from a trace is set as
// text (textContent), never as markup.
"use strict";
(function () {
  const ROOT = document.body.dataset.root || "";
  const PAGE = document.body.dataset.page;
  const main = document.getElementById("main");
  const statusLine = document.getElementById("status");
  const TIME_UNITS = { ns: 1, us: 1e3, ms: 1e6, s: 1e9 };
  const PHASE_COLORS = { data: "#8e6c8a", forward: "#2364aa", backward: "#3fa34d", optimizer: "#e39b1b", other: "#8d99a6" };

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  async function api(path) {
    const response = await fetch(ROOT + path, { headers: { Accept: "application/json" } });
    const body = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
    if (!response.ok) throw new Error(body.error || `HTTP ${response.status}`);
    return body;
  }

  // The same figures as perfkit's text and HTML reports (report.format.format_value).
  // Decimals as Python's format writes them: an exact tie rounds to the even digit.
  function fixed(x, d) {
    const exact = Math.abs(x).toFixed(Math.min(100, d + 60));
    const [whole, frac = ""] = exact.split(".");
    if (/^50*$/.test(frac.slice(d))) {
      const last = d ? frac[d - 1] : whole[whole.length - 1];
      if (Number(last) % 2 === 0) return (x < 0 ? "-" : "") + whole + (d ? "." + frac.slice(0, d) : "");
    }
    return x.toFixed(d);
  }
  function bytesText(n) {
    for (const [name, size] of [["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]) {
      if (Math.abs(n) >= size) return fixed(n / size, 1) + " " + name;
    }
    return String(Math.round(n)) + " B";
  }
  function fmt(value, unit, timeUnit) {
    if (value === null || value === undefined || (typeof value === "number" && Number.isNaN(value))) return "-";
    if (typeof value === "boolean") return value ? "yes" : "no";
    if (unit === "time") return fixed(Number(value) / TIME_UNITS[timeUnit || "ms"], 3);
    if (unit === "pct") return fixed(Number(value), 2);
    if (typeof value === "number") {
      if (unit === "bytes") return bytesText(value);
      if (unit === "count" || Number.isInteger(value)) return String(Math.round(value));
      return Math.abs(value) >= 1 ? fixed(value, 3) : Number(value.toPrecision(4)).toString();
    }
    return String(value).replace(/\n/g, " <- ");
  }
  function label(col, timeUnit) {
    return col.unit === "time" ? `${col.label} (${timeUnit})` : col.label;
  }
  function csvCell(v) {
    const s = v === null || v === undefined ? "" : String(v);
    return /[",\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  // A table of the report JSON: sortable by any column, filtered by a search box, exported as CSV
  // (raw values, as the JSON holds them).
  function tableBlock(id, table, timeUnit) {
    const cols = table.columns.filter((c) => !c.repeats_name);
    let rows = table.rows.slice();
    let sortKey = null, sortDir = 1, query = "";
    const body = el("tbody");
    const head = el("tr", {}, cols.map((c, i) =>
      el("th", { class: c.unit === "text" ? "text" : null, "data-key": c.key, title: "sort",
        onclick: () => { sortDir = sortKey === c.key ? -sortDir : (c.unit === "text" ? 1 : -1); sortKey = c.key; draw(); } },
        label(c, timeUnit))));
    function draw() {
      let shown = rows;
      if (query) {
        const q = query.toLowerCase();
        shown = shown.filter((r) => cols.some((c) => c.unit === "text" && String(r[c.key] ?? "").toLowerCase().includes(q)));
      }
      if (sortKey) {
        shown = shown.slice().sort((a, b) => {
          const x = a[sortKey], y = b[sortKey];
          if (x === y) return 0;
          if (x === null || x === undefined) return 1;
          if (y === null || y === undefined) return -1;
          return (x < y ? -1 : 1) * sortDir;
        });
      }
      const tree = !sortKey && !query && rows.length && "depth" in rows[0];
      const trs = shown.map((r, n) => {
        const tr = el("tr", { "data-depth": tree ? r.depth : null }, cols.map((c, i) =>
          el("td", { class: i === 0 ? "name" : (c.unit === "text" ? "text" : null), "data-key": c.key }, fmt(r[c.key], c.unit, timeUnit))));
        if (tree) {
          const first = tr.firstChild;
          first.style.paddingLeft = `${0.6 + 1.2 * (Number(r.depth) - 1 || 0)}em`;
          const next = shown[n + 1];
          if (next && Number(next.depth) > Number(r.depth)) {
            const toggle = el("button", { class: "fold", "aria-expanded": "true", title: "fold", onclick: () => fold(tr, toggle) }, "▾");
            first.prepend(toggle);
          }
        }
        return tr;
      });
      body.replaceChildren(...trs);
    }
    function fold(tr, toggle) {
      const open = toggle.getAttribute("aria-expanded") !== "true";
      toggle.setAttribute("aria-expanded", String(open));
      toggle.textContent = open ? "▾" : "▸";
      const depth = Number(tr.dataset.depth);
      for (let next = tr.nextElementSibling; next && Number(next.dataset.depth) > depth; next = next.nextElementSibling) {
        if (open) {
          next.hidden = false;
          const inner = next.querySelector("button.fold");
          if (inner) { inner.setAttribute("aria-expanded", "true"); inner.textContent = "▾"; }
        } else next.hidden = true;
      }
    }
    function csv() {
      const lines = [table.columns.map((c) => csvCell(c.key)).join(",")];
      for (const r of table.rows) lines.push(table.columns.map((c) => csvCell(r[c.key])).join(","));
      const blob = new Blob([lines.join("\n") + "\n"], { type: "text/csv" });
      const a = el("a", { href: URL.createObjectURL(blob), download: `${id}.csv` });
      document.body.append(a); a.click(); a.remove();
    }
    draw();
    return el("section", { class: "table", "data-table": id },
      el("h2", {}, table.title),
      table.note ? el("p", { class: "note" }, table.note) : null,
      el("div", { class: "tools" },
        el("input", { type: "search", placeholder: "filter rows", "aria-label": `filter ${table.title}`,
          oninput: (e) => { query = e.target.value; draw(); } }),
        el("button", { class: "act", onclick: csv }, "CSV")),
      el("div", { class: "scroll" }, el("table", {}, el("thead", {}, head), body)));
  }

  const charts = [];
  function chartBlock(chart, table, timeUnit) {
    if (!window.Chart || !table) return null;
    const rows = table.rows.filter((r) => !(chart.skip_rows || []).includes(r[chart.label]));
    const canvas = el("canvas");
    const box = el("div", { class: "chart", "data-chart": chart.id }, canvas);
    const colOf = Object.fromEntries(table.columns.map((c) => [c.key, c]));
    const scale = (key) => (colOf[key] && colOf[key].unit === "time" ? TIME_UNITS[timeUnit] : 1);
    let config;
    if (chart.kind === "roofline") {
      // points sized by time; the roof: min(peak FLOP rate, intensity x peak bandwidth)
      const [x, y, size, peakFlops, peakBw] = chart.series;
      const points = rows.filter((r) => r[x] > 0 && r[y] > 0);
      const biggest = Math.max(...points.map((r) => r[size] || 0), 1);
      const datasets = [{ label: "ops", data: points.map((r) => ({ x: r[x], y: r[y], name: String(r[chart.label]) })),
        pointRadius: points.map((r) => 3 + 9 * Math.sqrt((r[size] || 0) / biggest)) }];
      const peak = points.find((r) => r[peakFlops] > 0 && r[peakBw] > 0);
      if (peak) {
        const xs = points.map((r) => r[x]);
        const lo = Math.min(...xs) / 2, hi = Math.max(...xs) * 2, ridge = peak[peakFlops] / peak[peakBw];
        const roof = [lo, ...(ridge > lo && ridge < hi ? [ridge] : []), hi].map((v) => ({ x: v, y: Math.min(peak[peakFlops], v * peak[peakBw]) }));
        datasets.push({ label: "roofline", type: "line", data: roof, pointRadius: 0, borderColor: "#b3261e", borderWidth: 1.5 });
      }
      config = { type: "scatter", data: { datasets },
        options: { maintainAspectRatio: false, animation: false,
          plugins: { tooltip: { callbacks: { label: (c) => `${c.raw.name || ""} ${c.raw.x.toPrecision(3)} FLOP/B, ${c.raw.y.toPrecision(3)} TFLOP/s` } } },
          scales: { x: { type: "logarithmic", title: { display: true, text: colOf[x] ? colOf[x].label : x } }, y: { type: "logarithmic", title: { display: true, text: colOf[y] ? colOf[y].label : y } } } } };
    } else {
      const datasets = chart.series.map((key) => ({ label: colOf[key] ? label(colOf[key], timeUnit) : key,
        data: rows.map((r) => (r[key] === null || r[key] === undefined ? null : r[key] / scale(key))),
        backgroundColor: PHASE_COLORS[key.replace(/_ns$/, "")] || undefined }));
      config = { type: chart.kind === "line" ? "line" : "bar", data: { labels: rows.map((r) => String(r[chart.label])), datasets },
        options: { maintainAspectRatio: false, animation: false, indexAxis: chart.kind === "hbar" ? "y" : "x",
          scales: valueScales(chart, colOf) } };
    }
    requestAnimationFrame(() => charts.push(new window.Chart(canvas, config)));
    return el("section", {}, el("h2", {}, chart.title), box);
  }

  // The value axis of a chart: stacked when the chart is; byte counts written as the tables
  // write them (KiB, MiB, GiB).
  function valueScales(chart, colOf) {
    const axis = chart.kind === "hbar" ? "x" : "y";
    const stacked = chart.kind === "stacked";
    const bytes = chart.series.every((k) => colOf[k] && colOf[k].unit === "bytes");
    const value = { stacked, ...(bytes ? { ticks: { callback: (v) => bytesText(Number(v)) } } : {}) };
    return axis === "y" ? { x: { stacked }, y: value } : { y: { stacked }, x: value };
  }

  function tablesOf(doc, ids) {
    const out = [];
    for (const id of ids) {
      const table = doc.tables[id];
      if (!table) continue;
      for (const chart of doc.charts || []) if (chart.table === id) out.push(chartBlock(chart, table, doc.time_unit));
      out.push(tableBlock(id, table, doc.time_unit));
    }
    return out;
  }

  // ---- the training list ----
  function listPage() {
    let runs = [], query = "", sortKey = "folder", sortDir = 1;
    const picked = new Set();
    const filter = el("input", { type: "search", placeholder: "filter by name, folder, framework, host", size: 40,
      oninput: (e) => { query = e.target.value.toLowerCase(); draw(); } });
    const diff = el("button", { class: "act", disabled: true, onclick: () => {
      const [a, b] = [...picked];
      location.href = `${ROOT}/compare?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`;
    } }, "Diff the two picked runs");
    const cols = [["name", "Run"], ["framework", "Framework"], ["host", "Host"], ["date", "Date"], ["steps", "Steps"], ["step_ns", "Step time (ms)"], ["change_first", "Change first"], ["status", "Status"]];
    const head = el("tr", {}, el("th", {}, ""), cols.map(([k, t]) => el("th", { class: ["name", "framework", "host", "date", "change_first", "status"].includes(k) ? "text" : null,
      onclick: () => { sortDir = sortKey === k ? -sortDir : 1; sortKey = k; draw(); } }, t)));
    const body = el("tbody");
    main.replaceChildren(el("h1", {}, "Runs"),
      el("div", { class: "tools" }, filter, diff, el("span", { class: "muted", id: "count" })),
      el("table", { id: "runs" }, el("thead", {}, head), body));
    function statusCell(r) {
      if (r.status === "error") return el("span", { class: "badge error", title: r.error || "" }, "error: " + (r.error || ""));
      if (r.status === "in progress") return el("span", { class: "badge progress" }, "in progress");
      if (r.analysis === "running") return el("span", { class: "badge" }, "analysing…");
      return el("span", { class: "badge" }, "ready");
    }
    function draw() {
      let shown = runs.filter((r) => !query || [r.id, r.framework, r.host].some((v) => String(v || "").toLowerCase().includes(query)));
      shown = shown.slice().sort((a, b) => {
        const fa = a.folder.localeCompare(b.folder);
        if (sortKey === "folder" || fa !== 0) return fa || a.name.localeCompare(b.name);
        const x = a[sortKey], y = b[sortKey];
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * sortDir;
      });
      const trs = [];
      let folder = null;
      for (const r of shown) {
        if (r.folder !== folder) {
          folder = r.folder;
          trs.push(el("tr", { class: "group" }, el("td", { colspan: cols.length + 1 }, (folder || "(top level)") + "/ ",
            el("a", { class: "trend", href: `${ROOT}/trend?folder=${encodeURIComponent(folder)}` }, "trend"))));
        }
        const box = el("input", { type: "checkbox", "aria-label": `pick ${r.id}`, checked: picked.has(r.id),
          disabled: r.status !== "ready", onchange: (e) => { e.target.checked ? picked.add(r.id) : picked.delete(r.id); while (picked.size > 2) picked.delete(picked.values().next().value); diff.disabled = picked.size !== 2; draw(); } });
        trs.push(el("tr", { "data-run": r.id, "data-status": r.status },
          el("td", {}, box),
          el("td", { class: "name" }, r.status === "in progress" ? r.name : el("a", { href: `${ROOT}/run/${r.id.split("/").map(encodeURIComponent).join("/")}` }, r.name)),
          el("td", { class: "text" }, r.framework || "-"), el("td", { class: "text" }, r.host || "-"),
          el("td", { class: "text" }, r.date), el("td", {}, r.steps ?? "-"),
          el("td", { "data-key": "step_ns" }, r.step_ns ? fmt(r.step_ns, "time", "ms") : "-"),
          el("td", { class: "text" }, r.change_first || (r.note ? r.note : "-")),
          el("td", { class: "text" }, statusCell(r))));
      }
      body.replaceChildren(...trs);
      document.getElementById("count").textContent = `${shown.length} of ${runs.length} runs`;
    }
    async function poll() {
      try {
        runs = (await api("/api/runs")).runs;
        statusLine.textContent = `updated ${new Date().toLocaleTimeString()}`;
        draw();
      } catch (e) { statusLine.textContent = "cannot reach the server: " + e.message; }
      setTimeout(poll, 2000);
    }
    poll();
  }

  // ---- a run's pages ----
  const TABS = [
    ["overview", "Overview", ["model", "phases", "breakdown", "overview", "device", "device_timeline"]],
    ["operators", "Operators", ["family", "operator", "operator_average", "user"]],
    ["kernels", "Kernels", ["kernel"]],
    ["memory", "Memory", ["memory", "memory_timeline", "memcpy"]],
    ["layers", "Layers", ["layers"], "layers"],
    ["roofline", "Roofline", ["roofline", "mfu"]],
    ["input", "Input pipeline", ["benchmark"]],
    ["distributed", "Distributed", ["distributed", "ranks", "collectives"]],
    ["code", "Code", ["code"], "code"],
    ["timeline", "Timeline", [], "timeline"],
  ];

  function runId() {
    return location.pathname.slice((ROOT + "/run/").length).split("/").map(decodeURIComponent).join("/");
  }

  async function waitFor(promise, what) {
    const started = Date.now();
    const timer = setInterval(() => { statusLine.textContent = `${what}… ${Math.round((Date.now() - started) / 1000)} s`; }, 500);
    try { return await promise; } finally { clearInterval(timer); statusLine.textContent = ""; }
  }

  function headlineBlock(doc) {
    const h = doc.headline;
    if (!h) return null;
    const items = el("div", { class: "headline", id: "headline" }, (h.items || []).map((i) =>
      el("div", { "data-label": i.label }, el("span", {}, i.unit === "time" ? `${i.label} (${doc.time_unit})` : i.label), el("b", {}, fmt(i.value, i.unit, doc.time_unit)))));
    const total = (h.phases || []).reduce((s, p) => s + p.per_step_ns, 0) || 1;
    const bar = el("div", { class: "stepbar", id: "stepbar" }, (h.phases || []).map((p) =>
      el("span", { style: `width:${(100 * p.per_step_ns / total).toFixed(2)}%;background:${PHASE_COLORS[p.name] || "#777"}`, title: `${p.name}: ${fmt(p.per_step_ns, "time", doc.time_unit)} ${doc.time_unit} (${p.share_pct.toFixed(1)}% of the step)` }, p.name)));
    return el("section", {}, items, (h.phases || []).length ? bar : null, h.note ? el("p", { class: "note" }, h.note) : null);
  }

  function findingsBlock(doc) {
    if (!doc.advice || !doc.advice.length) return doc.advice_note ? el("p", { class: "note" }, doc.advice_note) : null;
    return el("section", { id: "advice" }, el("h2", {}, "Advice"), doc.advice_note ? el("p", { class: "note" }, doc.advice_note) : null,
      doc.advice.map((f) => {
        const s = f.summary || {};
        return el("div", { class: "finding", "data-finding": f.id },
          el("h3", {}, s.title || f.title),
          s.saving ? el("div", {}, el("b", {}, "Saving: "), s.saving) : null,
          s.remedy ? el("div", {}, el("b", {}, "Remedy: "), s.remedy) : null,
          el("details", {}, el("summary", {}, "Evidence"),
            (s.evidence || f.evidence || []).map((e) => el("p", { class: "note" }, typeof e === "string" ? e : JSON.stringify(e))),
            f.explanation ? el("p", {}, f.explanation) : null));
      }));
  }

  // Perfetto's deep-linking protocol: open the UI, PING until it answers PONG, then post the
  // trace as an ArrayBuffer (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui).
  async function openInPerfetto(traceUrl, title) {
    const target = document.body.dataset.perfetto || "https://ui.perfetto.dev";
    const origin = new URL(target, location.href).origin;
    const win = window.open(target);  // in the click itself, so no popup blocker stops it
    if (!win) { statusLine.textContent = "the browser blocked the Perfetto window"; return; }
    const buffer = await waitFor(fetch(traceUrl).then((r) => {
      if (!r.ok) throw new Error(`the trace export failed (HTTP ${r.status})`);
      return r.arrayBuffer();
    }), "exporting the trace");
    const timer = setInterval(() => win.postMessage("PING", origin), 50);
    window.addEventListener("message", function answered(event) {
      if (event.source !== win || event.data !== "PONG") return;
      clearInterval(timer);
      window.removeEventListener("message", answered);
      win.postMessage({ perfetto: { buffer, title, fileName: `${title.split("/").pop()}.trace.json`, url: location.href } }, origin);
    });
  }

  function runPage() {
    const id = runId();
    const path = id.split("/").map(encodeURIComponent).join("/");
    const docs = {};
    const content = el("div", { id: "tab" });
    const tabs = el("div", { class: "tabs", role: "tablist" });
    main.replaceChildren(el("h1", {}, id),
      el("div", { class: "links" },
        el("a", { href: `${ROOT}/files/report/${path}` }, "HTML report"),
        el("a", { href: `${ROOT}/api/runs/${path}` }, "JSON"),
        el("a", { href: `${ROOT}/files/trace/${path}` }, "Chrome trace"),
        el("button", { class: "act", id: "perfetto", onclick: () => openInPerfetto(`${ROOT}/files/trace/${path}`, id) }, "Open in Perfetto")),
      tabs, content);
    function load(key) {
      if (!docs[key]) {
        const q = key === "default" ? "" : key.startsWith("group:") ? `?views=family,operator,user&group=${key.slice(6)}` : `?views=${key}`;
        docs[key] = waitFor(api(`/api/runs/${path}${q}`), "analysing");
      }
      return docs[key];
    }
    async function show(name) {
      for (const b of tabs.children) b.setAttribute("aria-selected", String(b.dataset.tab === name));
      const [, title, ids, views] = TABS.find((t) => t[0] === name) || TABS[0];
      charts.splice(0).forEach((c) => c.destroy());
      content.replaceChildren(el("p", { class: "muted" }, "Analysing…"));
      if (name === "timeline") {
        try {
          await window.PerfkitTimeline.mount(content, { el, api, root: ROOT, status: statusLine, runId: id });
        } catch (e) {
          content.replaceChildren(el("p", { class: "error" }, e.message));
        }
        content.dataset.shown = name;
        return;
      }
      try {
        let doc = await load(views || "default");
        const parts = [];
        if (name === "overview") parts.push(headlineBlock(doc), findingsBlock(doc));
        if (name === "operators") {
          const group = new URLSearchParams(location.hash.slice(1)).get("group") || "name";
          if (group !== "name") doc = await load("group:" + group);
          parts.push(el("div", { class: "tools" }, "Group operators by ",
            el("select", { id: "group", onchange: (e) => { location.hash = `tab=operators&group=${e.target.value}`; } },
              ["name", "shape", "stack"].map((g) => el("option", { value: g, selected: g === group }, g === "shape" ? "input shape" : g === "stack" ? "call stack" : g)))));
        }
        const blocks = tablesOf(doc, ids);
        if (!blocks.length && !parts.some(Boolean)) parts.push(el("p", { class: "muted" }, `This run has nothing for ${title}.`));
        content.replaceChildren(...parts.filter(Boolean), ...blocks);
        content.dataset.shown = name;
      } catch (e) {
        content.replaceChildren(el("p", { class: "error" }, e.message));
        content.dataset.shown = name;
      }
    }
    for (const [name, title] of TABS) {
      tabs.append(el("button", { role: "tab", "data-tab": name, onclick: () => { location.hash = `tab=${name}`; } }, title));
    }
    const route = () => show(new URLSearchParams(location.hash.slice(1)).get("tab") || "overview");
    window.addEventListener("hashchange", route);
    route();
  }

  // ---- the diff of two runs ----
  async function comparePage() {
    const params = new URLSearchParams(location.search);
    let runs = [];
    try { runs = (await api("/api/runs")).runs.filter((r) => r.status === "ready"); } catch (e) { /* shown below */ }
    const pick = (name) => el("select", { id: name, "aria-label": name === "a" ? "baseline" : "compared run" },
      el("option", { value: "" }, "(pick a run)"),
      runs.map((r) => el("option", { value: r.id, selected: params.get(name) === r.id }, r.id)));
    const a = pick("a"), b = pick("b");
    const go = () => { if (a.value && b.value) location.search = `?a=${encodeURIComponent(a.value)}&b=${encodeURIComponent(b.value)}`; };
    const out = el("div", { id: "diff" });
    main.replaceChildren(el("h1", {}, "Diff"),
      el("div", { class: "tools" }, "Baseline ", a, " against ", b,
        el("button", { class: "act", onclick: go }, "Compare"),
        el("button", { class: "act", id: "swap", onclick: () => { const t = a.value; a.value = b.value; b.value = t; go(); } }, "Swap")),
      out);
    if (!params.get("a") || !params.get("b")) return;
    out.replaceChildren(el("p", { class: "muted" }, "Comparing…"));
    try {
      const doc = await waitFor(api(`/api/compare?a=${encodeURIComponent(params.get("a"))}&b=${encodeURIComponent(params.get("b"))}`), "comparing");
      const verdict = doc.verdict ? el("ul", { class: "verdict", id: "verdict" }, (doc.verdict.lines || []).map((l) => el("li", {}, l))) : null;
      out.replaceChildren(el("h2", {}, doc.title), el("p", { class: "muted" }, `Times in ${doc.time_unit} per ${doc.per}.`), verdict,
        ...tablesOf(doc, Object.keys(doc.tables)));
    } catch (e) {
      out.replaceChildren(el("p", { class: "error" }, e.message));
    }
  }

  // ---- a folder's runs over time ----
  async function trendPage() {
    const folder = new URLSearchParams(location.search).get("folder") || "";
    main.replaceChildren(el("h1", {}, `Trend: ${folder || "(top level)"}/`), el("p", { class: "muted" }, "Analysing the folder's runs…"));
    try {
      const doc = await waitFor(api(`/api/trend?folder=${encodeURIComponent(folder)}`), "analysing");
      const runs = doc.runs.filter((r) => !r.error);
      const phases = ["data", "forward", "backward", "optimizer", "other"];
      const canvas = el("canvas");
      const gateOf = {};
      for (const step of doc.steps) gateOf[step.b] = step;
      const rows = doc.runs.map((r) => {
        const step = gateOf[r.id];
        const gate = step ? step.gate : null;
        const verdict = !step ? "-" : gate.error ? "error: " + gate.error : gate.regressed ? "regression" : "ok";
        return el("tr", { "data-run": r.id },
          el("td", { class: "name" }, el("a", { href: `${ROOT}/run/${r.id.split("/").map(encodeURIComponent).join("/")}` }, r.id)),
          el("td", { class: "text" }, r.date || "-"),
          el("td", {}, r.error ? r.error : fmt(r.step_ns, "time", "ms")),
          el("td", { class: "text gate" }, step ? el("a", { href: `${ROOT}/compare?a=${encodeURIComponent(step.a)}&b=${encodeURIComponent(step.b)}`, title: gate.message || "" }, verdict) : "-"));
      });
      main.replaceChildren(el("h1", {}, `Trend: ${folder || "(top level)"}/`),
        el("p", { class: "note" }, `Step time and its phases run after run (the steady steps of each), and the regression gate between each run and the one before it at ${doc.fail_pct}% of step time; a verdict opens that pair's diff.`),
        el("div", { class: "chart" }, canvas),
        el("div", { class: "scroll" }, el("table", { id: "trend" }, el("thead", {}, el("tr", {}, el("th", { class: "text" }, "Run"), el("th", { class: "text" }, "Date"), el("th", {}, "Step time (ms)"), el("th", { class: "text" }, "Gate against the run before"))), el("tbody", {}, rows))));
      if (window.Chart && runs.length) {
        new window.Chart(canvas, { type: "bar", data: { labels: runs.map((r) => r.id.split("/").pop()),
          datasets: phases.map((p) => ({ label: `${p} (ms)`, backgroundColor: PHASE_COLORS[p], data: runs.map((r) => (r.phases[p] || 0) / 1e6) })) },
          options: { maintainAspectRatio: false, animation: false, scales: { x: { stacked: true }, y: { stacked: true } },
            onClick: (_, items) => { if (items.length) { const i = items[0].index; if (i > 0) location.href = `${ROOT}/compare?a=${encodeURIComponent(runs[i - 1].id)}&b=${encodeURIComponent(runs[i].id)}`; } } } });
      }
    } catch (e) {
      main.append(el("p", { class: "error" }, e.message));
    }
  }

  if (PAGE === "list") listPage();
  else if (PAGE === "trend") trendPage();
  else if (PAGE === "run") runPage();
  else if (PAGE === "compare") comparePage();
})();
