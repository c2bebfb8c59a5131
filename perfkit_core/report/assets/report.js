function perfkitTables() {
  const params = new URLSearchParams(location.search);
  document.querySelectorAll('table.data').forEach((table) => {
    const headers = table.querySelectorAll('th');
    headers.forEach((th, col) => th.addEventListener('click', () => {
      const asc = !th.classList.contains('sorted-asc');
      headers.forEach((h) => h.classList.remove('sorted-asc', 'sorted-desc'));
      th.classList.add(asc ? 'sorted-asc' : 'sorted-desc');
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      const key = (r) => { const c = r.cells[col]; const n = parseFloat(c.dataset.v); return isNaN(n) ? c.textContent : n; };
      rows.sort((a, b) => { const x = key(a), y = key(b); const d = (typeof x === 'number' && typeof y === 'number') ? x - y : String(x).localeCompare(String(y)); return asc ? d : -d; });
      rows.forEach((r) => body.appendChild(r));
    }));
    const box = document.getElementById(table.id + '-search');
    if (box) {
      const apply = () => { const q = box.value.toLowerCase(); let shown = 0;
        Array.from(table.tBodies[0].rows).forEach((r) => {
          const c = r.cells[0]; const text = ((c.dataset.name || '') + ' ' + c.textContent).toLowerCase();
          const hit = text.includes(q); r.style.display = hit ? '' : 'none'; if (hit) shown++; });
        table.dataset.shown = shown; };
      box.addEventListener('input', apply);
      if (params.get('q')) { box.value = params.get('q'); }
      apply();
    }
    perfkitTree(table);
    // How much of the table's width the name column gets (checked by the browser tests).
    const first = table.querySelector('th');
    if (first && table.offsetWidth) { table.dataset.nameShare = (first.offsetWidth / table.offsetWidth).toFixed(3); }
  });
  // A finding's cited ops and steps: show that row in its table.
  document.querySelectorAll('a.cite').forEach((a) => a.addEventListener('click', (event) => {
    const box = document.getElementById(a.dataset.table + '-search');
    if (!box) return;
    event.preventDefault();
    box.value = a.dataset.q; box.dispatchEvent(new Event('input'));
    document.getElementById(a.dataset.table).scrollIntoView();
  }));
}
function perfkitCharts(specs) {
  specs.forEach((spec) => {
    const canvas = document.getElementById(spec.id);
    if (!canvas || typeof Chart === 'undefined') return;
    if (spec.config.type === 'bubble') {
      // Log axes: a label at each power of ten only, written short (0.01, 100, 1e-6).
      const tick = (v) => { const l = Math.log10(v); if (Math.abs(l - Math.round(l)) > 1e-9) return '';
        return (v >= 0.001 && v < 1e5) ? String(+v.toPrecision(1)) : `1e${Math.round(l)}`; };
      ['x', 'y'].forEach((a) => { spec.config.options.scales[a].ticks = { callback: tick, autoSkip: false }; });
      // Roofline points name their op and time on hover.
      spec.config.options.plugins.tooltip = { callbacks: { label: (ctx) => ctx.raw.label
        ? `${ctx.raw.label}: ${ctx.raw.y.toPrecision(3)} TFLOP/s at ${ctx.raw.x.toPrecision(3)} FLOP/B, ${ctx.raw.time}`
        : ctx.dataset.label } };
    }
    const chart = new Chart(canvas, spec.config);
    canvas.dataset.rendered = '1';
    // Every category label drawn? (Chart.js skips labels that do not fit unless told not to;
    // line charts over time skip on purpose.)
    const axis = spec.config.options.indexAxis === 'y' ? 'y' : 'x';
    const ticks = chart.scales[axis] ? chart.scales[axis].ticks.length : 0;
    canvas.dataset.type = spec.config.type;
    canvas.dataset.labels = (spec.config.data.labels || []).length;
    canvas.dataset.labelsDrawn = ticks;
  });
  // The laid-out page height, so a screenshot can take the whole page.
  document.body.dataset.pageHeight = document.documentElement.scrollHeight;
}

// A tree table (rows with data-level): a row with deeper rows after it gets a button that folds
// them away and back; a folded row stays folded inside a parent opened again.
function perfkitTree(table) {
  const rows = Array.from(table.tBodies[0].rows).filter((r) => r.cells[0].dataset.level !== undefined);
  if (!rows.length) return;
  const level = (r) => parseInt(r.cells[0].dataset.level, 10);
  const below = (i) => { const out = []; for (let j = i + 1; j < rows.length && level(rows[j]) > level(rows[i]); j++) out.push(j); return out; };
  const show = (i) => {
    below(i).forEach((j) => { rows[j].style.display = 'none'; });
    const open = (k) => { below(k).filter((j) => level(rows[j]) === level(rows[k]) + 1).forEach((j) => {
      rows[j].style.display = ''; if (rows[j].dataset.folded !== 'yes') open(j); }); };
    if (rows[i].dataset.folded !== 'yes') open(i);
  };
  rows.forEach((row, i) => {
    if (!below(i).length) return;
    const button = document.createElement('button');
    button.className = 'fold'; button.type = 'button'; button.textContent = '\u25BE';
    button.setAttribute('aria-label', 'fold');
    button.addEventListener('click', () => {
      const folded = row.dataset.folded === 'yes';
      row.dataset.folded = folded ? 'no' : 'yes';
      button.textContent = folded ? '\u25BE' : '\u25B8';
      show(i);
    });
    row.cells[0].prepend(button);
  });
}
