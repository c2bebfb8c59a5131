// perfkit serve: the Timeline tab. A canvas of lanes (host threads, device streams) under a
// header of the time axis, the steps and their phases. The server sends what a window shows at
// the pixels drawn (events at least a pixel long, shorter ones merged into runs), so a frame
// never holds more than the lanes' rows times the canvas width. Strings from a trace are drawn
// on the canvas or set as text, never as markup.
"use strict";
window.PerfkitTimeline = (function () {
  const ROW_H = 16, LANE_PAD = 6, LABEL_W = 230, AXIS_H = 20, BAND_H = 18;
  const HEAD_H = AXIS_H + 2 * BAND_H;
  const PHASE_COLORS = { data: "#8e6c8a", forward: "#2364aa", backward: "#3fa34d", optimizer: "#e39b1b", other: "#8d99a6" };
  const LINK = "#d9480f", MATCH = "#ffd43b";

  // Durations and offsets with their unit: ns, us, ms or s, whichever reads best.
  function dur(ns) {
    const a = Math.abs(ns);
    if (a >= 1e9) return (ns / 1e9).toFixed(3) + " s";
    if (a >= 1e6) return (ns / 1e6).toFixed(3) + " ms";
    if (a >= 1e3) return (ns / 1e3).toFixed(3) + " us";
    return Math.round(ns) + " ns";
  }
  // A tick's label: in the unit of the tick spacing, with the decimals it needs.
  function tick(t, step) {
    const [unit, size] = step >= 1e9 ? ["s", 1e9] : step >= 1e6 ? ["ms", 1e6] : step >= 1e3 ? ["us", 1e3] : ["ns", 1];
    const decimals = Math.max(0, Math.ceil(-Math.log10(step / size) - 1e-9));
    return (t / size).toFixed(decimals) + " " + unit;
  }
  // A name cut to ``room`` pixels (with an ellipsis), its glyph widths measured once.
  const widths = new Map();
  function fit(c, name, room) {
    let total = 0;
    for (let i = 0; i < name.length; i++) {
      const ch = name[i];
      let w = widths.get(ch);
      if (w === undefined) { w = c.measureText(ch).width; widths.set(ch, w); }
      total += w;
      if (total > room) return i > 1 ? name.slice(0, i - 1) + "…" : "";
    }
    return name;
  }
  function hue(text) {
    let h = 2166136261;
    for (let i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 16777619); }
    return (h >>> 0) % 360;
  }

  function mount(host, ctx) {
    const { el, api, root, status } = ctx;
    const ranked = ctx.rank === undefined || ctx.rank === null ? {} : { rank: ctx.rank };
    const q = (path, params) => api(`/api/timeline/${path}?` + new URLSearchParams({ run: ctx.runId, ...ranked, ...params }));
    const state = {
      meta: null, t0: 0, t1: 1, folded: new Set(), data: null, names: {}, seq: 0, shownSeq: 0,
      selected: null, links: [], matches: [], matchAt: -1, layout: [], hits: [], frames: [],
      mountedAt: performance.now(), firstFrameMs: null, pendingInput: null,
    };
    const search = el("input", { type: "search", id: "tl-search", placeholder: "search event names", "aria-label": "search event names" });
    const found = el("span", { id: "tl-matches", class: "muted" });
    const range = el("span", { id: "tl-range", class: "muted" });
    const tools = el("div", { class: "tools tl-tools" },
      search,
      el("button", { class: "act", id: "tl-prev", title: "previous match", onclick: () => jump(-1) }, "‹"),
      el("button", { class: "act", id: "tl-next", title: "next match", onclick: () => jump(1) }, "›"),
      el("button", { class: "act", id: "tl-zoom-in", title: "zoom in (W)", onclick: (e) => zoomBy(0.5, null, e) }, "+"),
      el("button", { class: "act", id: "tl-zoom-out", title: "zoom out (S)", onclick: (e) => zoomBy(2, null, e) }, "−"),
      el("button", { class: "act", id: "tl-reset", title: "the whole profile (0)", onclick: (e) => setView(0, state.meta.span_ns, e) }, "All"),
      range, found);
    const hint = el("p", { class: "note" }, "Ctrl+wheel or W/S zooms, drag, Shift+wheel or A/D pans; click a step to zoom to it, an event for its details and launch links; ▾ folds a thread's framework-level rows.");
    const head = el("canvas", { id: "tl-head", class: "tl-canvas" });
    const headRow = el("div", { class: "tl-row" }, el("div", { class: "tl-labels", style: `height:${HEAD_H}px` }, el("div", { class: "tl-axis-label muted" }, "time · steps · phases")), head);
    const labels = el("div", { class: "tl-labels", id: "tl-labels" });
    const body = el("canvas", { id: "tl-body", class: "tl-canvas", tabindex: "0" });
    const scroller = el("div", { class: "tl-scroll" }, el("div", { class: "tl-row" }, labels, body));
    const tip = el("div", { class: "tl-tip", hidden: true });
    const detail = el("section", { id: "tl-detail" });
    const wrap = el("div", { id: "timeline", class: "timeline" }, tools, hint, headRow, scroller, tip, detail);
    host.replaceChildren(wrap);

    function width() { return Math.max(200, wrap.clientWidth - LABEL_W - 2); }
    const nspp = () => (state.t1 - state.t0) / width();
    const xOf = (t) => (t - state.t0) / nspp();

    // ---- layout: each lane's rows, folded or not ----
    function layoutLanes() {
      let y = 0;
      state.layout = state.meta.lanes.map((lane) => {
        const folded = lane.kind === "thread" && state.folded.has(lane.id);
        const rows = Math.max(1, folded ? lane.folded_rows : lane.rows);
        const box = { lane, y, rows, folded, h: rows * ROW_H + LANE_PAD };
        y += box.h;
        return box;
      });
      labels.replaceChildren(...state.layout.map((box) => el("div", {
        class: "tl-lane", "data-lane": box.lane.id, "data-rows": box.rows, style: `height:${box.h}px`, title: box.lane.label,
      }, box.lane.kind === "thread" ? el("button", { class: "tl-fold", "data-lane": box.lane.id, "aria-expanded": String(!box.folded),
        title: box.folded ? "show framework-level rows" : "fold framework-level rows", onclick: () => fold(box.lane.id) }, box.folded ? "▸" : "▾") : null,
      el("span", {}, box.lane.label))));
      labels.style.height = `${y}px`;
      sizeCanvas(body, y);
    }
    function sizeCanvas(canvas, h) {
      const dpr = window.devicePixelRatio || 1, w = width();
      canvas.style.width = `${w}px`; canvas.style.height = `${h}px`;
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
      canvas.getContext("2d").setTransform(dpr, 0, 0, dpr, 0, 0);
    }
    function boxOf(laneId) { return state.layout.find((b) => b.lane.id === laneId); }
    function rowOf(it, box) { return box.folded ? it.folded_row : it.row; }

    // ---- data: the window around the view, at its pixels ----
    function covers(d) {
      if (!d) return false;
      const ratio = d.px_ns / nspp();
      return d.t0 <= state.t0 && d.t1 >= state.t1 && ratio > 0.66 && ratio < 1.5 && d.fold === [...state.folded].sort().join(",");
    }
    async function fetchSlice(input) {
      const w = state.t1 - state.t0, seq = ++state.seq;
      const fold = [...state.folded].sort().join(",");
      // a margin of a quarter view on each side: a pan that short needs no fetch
      const params = { t0: Math.floor(Math.max(0, state.t0 - w / 4)), t1: Math.ceil(state.t1 + w / 4), px: nspp(), fold };
      const asked = performance.now();
      const data = await q("slice", params);
      if (seq < state.shownSeq) return;  // a later answer is already drawn
      if (input) input.fetchMs = performance.now() - asked;
      state.shownSeq = seq;
      data.fold = fold;
      Object.assign(state.names, data.names);
      state.data = data;
      draw(input, true);
    }
    function refresh(input) {
      if (covers(state.data)) { draw(input, false); return; }
      const asked = fetchSlice(input);  // asked first, so the server works while the page draws
      draw(null, false);  // what is known, at once; the window's own data follows
      asked.catch((e) => { status.textContent = e.message; });
    }

    // ---- view ----
    function clampView(t0, t1) {
      const span = state.meta.span_ns, min = 1000;
      let w = Math.min(Math.max(t1 - t0, min), span * 1.1);
      t0 = Math.min(Math.max(t0, -span * 0.05), span * 1.05 - w);
      return [t0, t0 + w];
    }
    function setView(t0, t1, input) {
      [state.t0, state.t1] = clampView(t0, t1);
      range.textContent = `${dur(state.t0)} – ${dur(state.t1)} of ${dur(state.meta.span_ns)}`;
      refresh(input ? { type: input.type || "view", at: input.timeStamp || performance.now() } : null);
    }
    function zoomBy(factor, x, input) {
      const at = x === null ? width() / 2 : x;
      const t = state.t0 + at * nspp();
      setView(t - (t - state.t0) * factor, t + (state.t1 - t) * factor, input);
    }
    function panBy(px, input) { const d = px * nspp(); setView(state.t0 + d, state.t1 + d, input); }

    // ---- drawing ----
    function draw(input, fresh) {
      const began = performance.now();
      const ctx2 = body.getContext("2d"), w = width(), h = body.clientHeight;
      ctx2.clearRect(0, 0, w, h);
      state.hits = [];
      for (const box of state.layout) {
        ctx2.fillStyle = box.lane.id % 2 ? "#fafbfc" : "#ffffff";
        ctx2.fillRect(0, box.y, w, box.h);
        ctx2.fillStyle = "#e3e7eb"; ctx2.fillRect(0, box.y + box.h - 1, w, 1);
      }
      // step boundaries across the lanes
      ctx2.fillStyle = "rgba(35,100,170,0.25)";
      for (const [s, e] of state.meta.steps) for (const t of [s, e]) { const x = xOf(t); if (x >= 0 && x <= w) ctx2.fillRect(Math.round(x), 0, 1, h); }
      const d = state.data;
      if (d) for (const laneData of d.lanes) {
        const box = boxOf(laneData.lane);
        if (!box) continue;
        const m = laneData.merged;
        ctx2.fillStyle = "rgba(120,130,142,0.55)";
        for (let i = 0; i < m.length; i += 4) {
          const x0 = xOf(m[i]), x1 = Math.max(xOf(m[i + 1]), x0 + 1);
          if (x1 < 0 || x0 > w) continue;
          const y = box.y + 2 + m[i + 2] * ROW_H;
          ctx2.fillRect(x0, y, x1 - x0, ROW_H - 2);
          state.hits.push([x0, x1, y, y + ROW_H - 2, -1, m[i], m[i + 1], m[i + 3]]);
        }
        const ev = laneData.events;
        ctx2.font = "11px system-ui, sans-serif"; ctx2.textBaseline = "middle";
        for (let i = 0; i < ev.length; i += 6) {
          const x0 = xOf(ev[i]), x1 = Math.max(xOf(ev[i] + ev[i + 1]), x0 + 1);
          if (x1 < 0 || x0 > w) continue;
          const y = box.y + 2 + ev[i + 2] * ROW_H, name = state.names[ev[i + 4]] || "";
          const device = box.lane.kind === "stream";
          ctx2.fillStyle = `hsl(${hue(name)},${device ? 60 : 45}%,${device ? 52 : 68}%)`;
          ctx2.fillRect(x0, y, x1 - x0, ROW_H - 2);
          state.hits.push([x0, x1, y, y + ROW_H - 2, ev[i + 3]]);
          const cx0 = Math.max(x0, 0), cw = Math.min(x1, w) - cx0;
          if (cw > 28) {
            ctx2.fillStyle = device ? "#fff" : "#1d232b";
            ctx2.fillText(fit(ctx2, name, cw - 6), cx0 + 3, y + (ROW_H - 2) / 2);
          }
        }
      }
      outline(ctx2, state.matches, MATCH, 2);
      outline(ctx2, state.links, LINK, 2);
      if (state.selected) outline(ctx2, [state.selected], "#000", 2);
      flows(ctx2);
      drawHead();
      if (input) input.drawMs = performance.now() - began;
      // a task posted from the next animation frame runs once that frame is painted
      requestAnimationFrame(() => { const ch = new MessageChannel(); ch.port1.onmessage = () => painted(input, fresh); ch.port2.postMessage(0); });
    }
    function painted(input, fresh) {
      const now = performance.now();
      if (state.data && state.firstFrameMs === null) state.firstFrameMs = now - state.mountedAt;
      if (input) state.frames.push({ type: input.type, ms: now - input.at, fetched: fresh, fetchMs: input.fetchMs, drawMs: input.drawMs });
      wrap.dataset.frames = String(state.frames.length);
      if (state.data) wrap.dataset.ready = "1";
    }
    function place(it) {
      const box = boxOf(it.lane);
      if (!box) return null;
      const row = rowOf(it, box);
      if (row < 0) return null;
      const x0 = xOf(it.start_ns), x1 = Math.max(xOf(it.start_ns + it.dur_ns), x0 + 1);
      return { x0, x1, y: box.y + 2 + row * ROW_H };
    }
    function outline(ctx2, items, color, lw) {
      ctx2.strokeStyle = color; ctx2.lineWidth = lw;
      for (const it of items) {
        const p = place(it);
        if (!p || p.x1 < 0 || p.x0 > width()) continue;
        ctx2.strokeRect(p.x0 - 1, p.y - 1, p.x1 - p.x0 + 2, ROW_H);
      }
    }
    function flows(ctx2) {
      ctx2.strokeStyle = LINK; ctx2.fillStyle = LINK; ctx2.lineWidth = 1.2;
      for (const it of state.links) {
        if (!it.launcher) continue;
        const a = place(it.launcher), b = place(it);
        if (!a || !b) continue;
        const ax = a.x0, ay = a.y + ROW_H - 2, bx = b.x0, by = b.y;
        if (Math.max(ax, bx) < 0 || Math.min(ax, bx) > width()) continue;
        ctx2.beginPath(); ctx2.moveTo(ax, ay);
        ctx2.bezierCurveTo(ax, (ay + by) / 2, bx, (ay + by) / 2, bx, by); ctx2.stroke();
        ctx2.beginPath(); ctx2.moveTo(bx, by); ctx2.lineTo(bx - 3, by - 6); ctx2.lineTo(bx + 3, by - 6); ctx2.fill();
      }
    }
    function drawHead() {
      const c = head.getContext("2d"), w = width();
      c.clearRect(0, 0, w, HEAD_H);
      c.fillStyle = "#f5f7f9"; c.fillRect(0, 0, w, HEAD_H);
      c.font = "11px system-ui, sans-serif"; c.textBaseline = "middle"; c.fillStyle = "#5b6673";
      const span = state.t1 - state.t0, raw = span / (w / 110), p = 10 ** Math.floor(Math.log10(raw));
      const step = [1, 2, 5, 10].map((k) => k * p).find((s) => s >= raw);
      for (let t = Math.ceil(state.t0 / step) * step; t <= state.t1; t += step) {
        const x = xOf(t);
        c.fillRect(Math.round(x), AXIS_H - 6, 1, 6);
        c.fillText(tick(t, step), x + 3, AXIS_H / 2 - 1);
      }
      state.stepBoxes = [];
      state.meta.steps.forEach(([s, e, n], i) => {
        const x0 = xOf(s), x1 = xOf(e);
        if (x1 < 0 || x0 > w) return;
        c.fillStyle = i % 2 ? "#c9d8ea" : "#dbe6f2"; c.fillRect(x0, AXIS_H, Math.max(x1 - x0, 1), BAND_H - 1);
        state.stepBoxes.push([x0, x1, s, e]);
        if (x1 - x0 > 40) { c.fillStyle = "#1d232b"; c.fillText(`step ${n}`, Math.max(x0, 0) + 3, AXIS_H + BAND_H / 2); }
      });
      for (const [s, e, phase] of state.meta.phases) {
        const x0 = xOf(s), x1 = xOf(e);
        if (x1 < 0 || x0 > w) continue;
        c.fillStyle = PHASE_COLORS[phase] || "#777"; c.fillRect(x0, AXIS_H + BAND_H, Math.max(x1 - x0, 1), BAND_H - 1);
        if (x1 - x0 > 50) { c.fillStyle = "#fff"; c.fillText(phase, Math.max(x0, 0) + 3, AXIS_H + 1.5 * BAND_H); }
      }
    }

    // ---- what is under the pointer ----
    function hitAt(x, y) {
      let best = null;
      for (const h of state.hits) {
        if (x >= h[0] - 1 && x <= h[1] + 1 && y >= h[2] && y <= h[3]) {
          if (!best || (h[4] >= 0 && (best[4] < 0 || h[1] - h[0] < best[1] - best[0]))) best = h;
        }
      }
      return best;
    }
    async function select(id, reveal) {
      const found = await q("event", { id });
      state.selected = found;
      // an operator: the device work it launched, each with its runtime call (an arrow each);
      // a device event: the calls above it, and the arrow from the call that launched it
      state.links = found.launched ? found.launched.events
        : (found.launched_by || []).concat(found.launched_by && found.launched_by.length ? [{ ...found, launcher: found.launched_by[0] }] : []);
      if (reveal) revealItem(found);
      showDetail(found);
      draw(null, false);
    }
    function revealItem(it) {
      const box = boxOf(it.lane);
      if (box && box.folded && it.folded_row < 0) { state.folded.delete(it.lane); layoutLanes(); }
      const pad = Math.max(it.dur_ns * 4, 20000);
      if (it.start_ns < state.t0 || it.start_ns + it.dur_ns > state.t1 || it.dur_ns < nspp() * 2) {
        setView(it.start_ns - pad, it.start_ns + it.dur_ns + pad, { type: "reveal" });
      }
      const b = boxOf(it.lane);
      if (b) scroller.scrollTop = Math.max(0, b.y + it.row * ROW_H - scroller.clientHeight / 2);
    }
    function link(it) {
      return el("button", { class: "tl-link", "data-event": it.id, onclick: () => select(it.id, true) }, it.name);
    }
    function showDetail(it) {
      const lane = state.meta.lanes[it.lane];
      const rows = [["Kind", it.kind], ["Lane", lane ? lane.label : ""], ["Start (from the timeline's start)", dur(it.start_ns)], ["Duration", dur(it.dur_ns)]];
      for (const [k, v] of Object.entries(it.columns || {})) rows.push([k, String(v)]);
      const parts = [el("h2", {}, it.name), el("table", { class: "tl-cols" }, el("tbody", {}, rows.map(([k, v]) => el("tr", {}, el("th", { class: "text" }, k), el("td", { class: "text" }, k === "stack" ? el("pre", {}, v) : v)))))];
      if (it.launched) {
        const l = it.launched;
        parts.push(el("h3", {}, `Launched: ${l.count} device event${l.count === 1 ? "" : "s"}, ${dur(l.device_ns)} on the device`));
        if (l.count > l.events.length) parts.push(el("p", { class: "note" }, `The first ${l.events.length} are listed.`));
        parts.push(el("ul", { id: "tl-launched" }, l.events.map((k) => el("li", { "data-kind": k.kind }, link(k), ` ${dur(k.dur_ns)} on ${state.meta.lanes[k.lane].label}`, k.launcher ? ` · launched by ${k.launcher.name}` : ""))));
      } else if (it.launched_by) {
        parts.push(el("h3", {}, "Launched by"));
        parts.push(el("ul", { id: "tl-launched-by" }, it.launched_by.map((k) => el("li", { "data-kind": k.kind }, link(k), ` ${dur(k.dur_ns)}`))));
      }
      detail.replaceChildren(...parts);
      detail.dataset.event = String(it.id);
    }
    async function runSearch() {
      const text = search.value.trim();
      if (!text) { state.matches = []; found.textContent = ""; draw(null, false); return; }
      const res = await q("search", { q: text });
      state.matches = res.matches; state.matchAt = -1;
      found.textContent = `${res.total} match${res.total === 1 ? "" : "es"}` + (res.names.length ? `: ${res.names.slice(0, 4).map(([n, c]) => `${n} ${c}`).join(", ")}${res.names.length > 4 ? ", …" : ""}` : "");
      found.dataset.total = String(res.total);
      if (res.matches.length) jump(1); else draw(null, false);
    }
    function jump(dir) {
      if (!state.matches.length) return;
      state.matchAt = (state.matchAt + dir + state.matches.length) % state.matches.length;
      select(state.matches[state.matchAt].id, true);
    }
    function fold(laneId) {
      if (state.folded.has(laneId)) state.folded.delete(laneId); else state.folded.add(laneId);
      layoutLanes();
      refresh({ type: "fold", at: performance.now() });
    }

    // ---- input ----
    let drag = null;
    body.addEventListener("mousedown", (e) => { drag = { x: e.clientX, moved: false, t0: state.t0, t1: state.t1 }; });
    window.addEventListener("mousemove", (e) => {
      if (!drag) return;
      const dx = e.clientX - drag.x;
      if (Math.abs(dx) > 3) drag.moved = true;
      if (drag.moved) { const d = -dx * nspp(); setView(drag.t0 + d, drag.t1 + d, e); }
    });
    window.addEventListener("mouseup", () => { setTimeout(() => { drag = null; }, 0); });
    body.addEventListener("click", (e) => {
      if (drag && drag.moved) return;
      const h = hitAt(e.offsetX, e.offsetY);
      if (!h) return;
      if (h[4] < 0) setView(h[5] - (h[6] - h[5]) * 0.1, h[6] + (h[6] - h[5]) * 0.1, e);  // a merged run: zoom in
      else select(h[4], false);
    });
    body.addEventListener("mousemove", (e) => {
      const h = drag ? null : hitAt(e.offsetX, e.offsetY);
      if (!h) { tip.hidden = true; return; }
      tip.hidden = false;
      tip.textContent = h[4] < 0 ? `${h[7]} events shorter than a pixel (${dur(h[6] - h[5])}): click to zoom in` : "";
      if (h[4] >= 0) {
        const ev = findEvent(h[4]);
        tip.textContent = ev ? `${state.names[ev[4]] || ""} · ${dur(ev[1])}` : "";
      }
      tip.style.left = `${e.clientX + 12}px`; tip.style.top = `${e.clientY + 12}px`;
    });
    body.addEventListener("mouseleave", () => { tip.hidden = true; });
    function findEvent(id) {
      for (const laneData of (state.data || { lanes: [] }).lanes) {
        const ev = laneData.events;
        for (let i = 3; i < ev.length; i += 6) if (ev[i] === id) return ev.slice(i - 3, i + 3);
      }
      return null;
    }
    function onWheel(e) {
      if (e.ctrlKey || e.metaKey) { e.preventDefault(); zoomBy(Math.exp(e.deltaY * 0.002), e.offsetX, e); }
      else if (e.shiftKey) { e.preventDefault(); panBy(e.deltaY || e.deltaX, e); }
    }
    body.addEventListener("wheel", onWheel, { passive: false });
    head.addEventListener("wheel", onWheel, { passive: false });
    head.addEventListener("click", (e) => {
      if (e.offsetY < AXIS_H || e.offsetY > AXIS_H + BAND_H) return;
      const s = (state.stepBoxes || []).find(([x0, x1]) => e.offsetX >= x0 && e.offsetX <= x1);
      if (s) setView(s[2] - (s[3] - s[2]) * 0.02, s[3] + (s[3] - s[2]) * 0.02, e);
    });
    function onKey(e) {
      if (!document.body.contains(wrap)) { window.removeEventListener("keydown", onKey); return; }
      if (e.target instanceof HTMLInputElement || e.ctrlKey || e.metaKey || e.altKey) return;
      const k = e.key.toLowerCase();
      if (k === "w") zoomBy(0.8, null, e);
      else if (k === "s") zoomBy(1.25, null, e);
      else if (k === "a") panBy(-width() * 0.2, e);
      else if (k === "d") panBy(width() * 0.2, e);
      else if (k === "0") setView(0, state.meta.span_ns, e);
      else return;
      e.preventDefault();
    }
    window.addEventListener("keydown", onKey);
    search.addEventListener("keydown", (e) => { if (e.key === "Enter") runSearch().catch((x) => { found.textContent = x.message; }); });
    function onResize() {
      if (!document.body.contains(wrap)) { window.removeEventListener("resize", onResize); return; }
      if (state.meta && state.meta.lanes.length) { layoutLanes(); sizeCanvas(head, HEAD_H); refresh(null); }
    }
    window.addEventListener("resize", onResize);

    // ---- start ----
    const started = (async () => {
      state.meta = await q("meta", {});
      sizeCanvas(head, HEAD_H);
      if (state.meta.job_ranks.length) {  // a job: one rank's timeline at a time
        tools.prepend(el("label", {}, "Rank ", el("select", { id: "tl-rank", onchange: (e) => mount(host, { ...ctx, rank: Number(e.target.value) }) },
          state.meta.job_ranks.map((r) => el("option", { value: r, selected: r === state.meta.rank }, String(r))))));
      }
      if (!state.meta.lanes.length) {
        wrap.replaceChildren(el("p", { class: "muted" }, "This run recorded no events to draw."));
        return;
      }
      layoutLanes();
      setView(0, state.meta.span_ns, { type: "open", at: state.mountedAt });
    })();
    window.perfkitTimeline = {
      state, started,
      view: () => ({ t0: state.t0, t1: state.t1 }),
      lane: (id) => boxOf(id),
      place: (it) => place(it),
    };
    return started;
  }

  return { mount };
})();
