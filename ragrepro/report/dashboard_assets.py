"""The dashboard's inline CSS and JavaScript (results/index.html needs no server or CDN)."""
from __future__ import annotations

CSS = """
body{font-family:system-ui,sans-serif;margin:1.2em;color:#222}
table{border-collapse:collapse;font-size:12px;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top}
th{background:#f3f3f3;cursor:pointer;white-space:nowrap}
th.nosort{cursor:default}
th[aria-sort=ascending]::after{content:" \\25B2"}
th[aria-sort=descending]::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.selected{background:#fff6d5}
tr[data-status="not run"]{color:#888}
.controls{display:flex;gap:.6em;align-items:center}
.hint,.note{color:#555;font-size:12px;margin:.2em 0}
summary{cursor:pointer;margin:.4em 0}
figure{display:inline-block;margin:.5em;vertical-align:top;max-width:660px}
pre{background:#f6f6f6;padding:.5em;white-space:pre-wrap}
td.differs{background:#ffe3e3}
.scroll{overflow-x:auto;max-width:100%}
table.report td.comment{min-width:28em;max-width:48em;white-space:normal}
table.grid td{min-width:9em}
table.grid td[data-status="not run"]{color:#999}
table.grid th.rowhead{text-align:left;cursor:default}
.grid .paper{color:#666;font-size:11px}
.grid .gain{font-size:11px}
.grid .flags,td.flags{color:#b00;font-size:11px}
.grid .n{color:#666;font-size:11px}
.grid .label{color:#335;font-size:11px;margin-right:.3em}
.demo{background:#fff0c0;border:2px solid #d90;padding:.5em;font-weight:bold}
.run-demo{color:#b60;font-weight:bold}
"""

JS = r"""
(function(){
  const runs = JSON.parse(document.getElementById('runs-data').textContent);
  const table = document.getElementById('runs-table');
  const tbody = table.tBodies[0];
  const rows = Array.from(tbody.rows);
  const filter = document.getElementById('filter');
  const expSel = document.getElementById('experiment-filter');
  const count = document.getElementById('shown-count');

  function applyFilter(){
    const terms = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const exp = expSel.value;
    let shown = 0;
    rows.forEach(function(tr){
      const text = tr.textContent.toLowerCase();
      const ok = terms.every(function(t){ return text.indexOf(t) >= 0; }) &&
                 (!exp || tr.dataset.experiment === exp);
      tr.style.display = ok ? '' : 'none';
      if (ok) shown++;
    });
    count.textContent = shown + ' of ' + rows.length + ' runs shown';
  }
  filter.addEventListener('input', applyFilter);
  expSel.addEventListener('change', applyFilter);

  Array.from(table.tHead.rows[0].cells).forEach(function(th, col){
    if (th.classList.contains('nosort')) return;
    th.addEventListener('click', function(){
      const asc = th.getAttribute('aria-sort') !== 'ascending';
      Array.from(table.tHead.rows[0].cells).forEach(function(h){ h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', asc ? 'ascending' : 'descending');
      const key = function(tr){ return tr.cells[col].dataset.sort || ''; };
      const sorted = rows.slice().sort(function(a, b){
        const x = key(a), y = key(b);
        if (x === '' && y !== '') return 1;
        if (y === '' && x !== '') return -1;
        const nx = parseFloat(x), ny = parseFloat(y);
        const c = (!isNaN(nx) && !isNaN(ny) && String(nx) !== 'NaN') ? nx - ny : x.localeCompare(y);
        return asc ? c : -c;
      });
      sorted.forEach(function(tr){ tbody.appendChild(tr); });
    });
  });

  function flatten(obj, prefix, out){
    out = out || {};
    if (obj === null || typeof obj !== 'object' || Array.isArray(obj)) {
      if (prefix) out[prefix] = obj;
      return out;
    }
    const keys = Object.keys(obj);
    if (!keys.length && prefix) out[prefix] = obj;
    keys.forEach(function(k){ flatten(obj[k], prefix ? prefix + '.' + k : k, out); });
    return out;
  }
  function show(v){
    if (v === undefined) return '(unset)';
    if (v === null) return 'null';
    if (typeof v === 'number') return String(Number(v.toPrecision(6)));
    if (typeof v === 'object') return JSON.stringify(v);
    return String(v);
  }
  function esc(s){ const d = document.createElement('div'); d.textContent = s; return d.innerHTML; }

  // Runs in the order they were ticked: the comparison's columns follow the clicks.
  let order = [];
  function selected(){
    const checked = Array.from(tbody.querySelectorAll('input.sel:checked')).map(function(c){ return +c.value; });
    order = order.filter(function(i){ return checked.indexOf(i) >= 0; });
    checked.forEach(function(i){ if (order.indexOf(i) < 0) order.push(i); });
    return order.slice();
  }
  function renderCompare(){
    const sel = selected();
    rows.forEach(function(tr){
      tr.classList.toggle('selected', sel.indexOf(+tr.dataset.run) >= 0);
    });
    const body = document.getElementById('compare-body');
    if (sel.length < 2) {
      body.innerHTML = '<p>Select two or more runs in the table above (' + sel.length + ' selected).</p>';
      return;
    }
    const picked = sel.map(function(i){ return runs[i]; });
    const head = '<tr><th>key</th>' + picked.map(function(r){
      return '<th>' + esc(r.experiment + '/' + r.run_id) + '</th>'; }).join('') + '</tr>';
    const flat = picked.map(function(r){
      return flatten({settings: r.settings, config: r.config});
    });
    const keys = [];
    flat.forEach(function(f){ Object.keys(f).forEach(function(k){ if (keys.indexOf(k) < 0) keys.push(k); }); });
    keys.sort();
    const ignore = /^config\.(wandb|hydra)\./;
    const same = function(a, b){
      return flat.every(function(f){ return show(f[a]) === show(f[b]); });
    };
    const diff = keys.filter(function(k){
      if (ignore.test(k)) return false;
      // config.x repeats settings.x when the pipeline reports it: show it once.
      if (k.indexOf('config.') === 0 && keys.indexOf('settings.' + k.slice(7)) >= 0 &&
          same(k, 'settings.' + k.slice(7))) return false;
      const vals = flat.map(function(f){ return show(f[k]); });
      return vals.some(function(v){ return v !== vals[0]; });
    });
    const dRows = diff.map(function(k){
      return '<tr data-key="' + esc(k) + '"><td>' + esc(k) + '</td>' +
        flat.map(function(f){ return '<td class="differs">' + esc(show(f[k])) + '</td>'; }).join('') + '</tr>';
    }).join('');
    const mKeys = [];
    picked.forEach(function(r){ Object.keys(r.metrics || {}).forEach(function(k){ if (mKeys.indexOf(k) < 0) mKeys.push(k); }); });
    const mRows = mKeys.map(function(k){
      return '<tr data-key="' + esc(k) + '"><td>' + esc(k) + '</td>' +
        picked.map(function(r){
          const iv = (r.intervals || {})[k];
          const ci = iv ? ' [' + show(iv[0]) + ', ' + show(iv[1]) + '] n=' + iv[2] : '';
          return '<td class="num">' + esc(show((r.metrics || {})[k]) + ci) + '</td>'; }).join('') + '</tr>';
    }).join('');
    const links = picked.map(function(r){
      let s = esc(r.experiment + '/' + r.run_id);
      if (r.href) s = '<a href="' + esc(r.href) + '">' + s + '</a> (<a href="' + esc(r.href) + 'config.json">config.json</a>)';
      if (r.wandb_url) s += ' · <a href="' + esc(r.wandb_url) + '">W&amp;B</a>';
      return '<li>' + s + '</li>';
    }).join('');
    body.innerHTML = '<ul>' + links + '</ul>' +
      '<h3>Settings that differ (' + diff.length + ')</h3>' +
      (diff.length ? '<table id="compare-settings">' + head + dRows + '</table>' : '<p>None: same settings.</p>') +
      '<h3>Metrics [95% CI] n</h3><p class="hint">Paired tests between runs: <code>ragrepro compare RUN_A RUN_B</code>.</p><table id="compare-metrics">' + head + mRows + '</table>';
  }
  tbody.addEventListener('change', function(e){
    if (!e.target.classList.contains('sel')) return;
    const i = +e.target.value;
    order = order.filter(function(j){ return j !== i; });
    if (e.target.checked) order.push(i);
    renderCompare();
  });
  document.getElementById('clear-selection').addEventListener('click', function(){
    tbody.querySelectorAll('input.sel').forEach(function(c){ c.checked = false; });
    renderCompare();
  });
})();
"""
