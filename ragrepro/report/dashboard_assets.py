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
      '<h3>Metrics [95% CI] n</h3><p class="hint">Paired tests between runs: <code>ragrepro compare RUN_A RUN_B</code>.</p><table id="compare-metrics">' + head + mRows + '</table>' +
      flipsHtml(sel);
  }

  // Per-sample flips of the second ticked run against the first (ragrepro.report.flips,
  // computed by `ragrepro report` for every two runs of one experiment, stored as i < j).
  const flipsData = JSON.parse(document.getElementById('flips-data').textContent);
  const FLIP_LABELS = {right_to_wrong: 'right→wrong', wrong_to_right: 'wrong→right',
    both_right: 'both right', both_wrong: 'both wrong', worse: 'worse', better: 'better', same: 'same'};
  const SWAP = {right_to_wrong: 'wrong_to_right', wrong_to_right: 'right_to_wrong', worse: 'better', better: 'worse'};
  const CHANGES = {outcome: ['right_to_wrong', 'wrong_to_right'], nll: ['worse', 'better']};
  const COUNTS = {outcome: ['right_to_wrong', 'wrong_to_right', 'both_right', 'both_wrong'], nll: ['worse', 'better', 'same']};
  function pairFlips(a, b){
    const f = flipsData.pairs[Math.min(a, b) + ',' + Math.max(a, b)];
    if (!f || f.why || a < b) return f ? {f: f, paired: f.paired ? f.paired[0] : ''} : null;
    // the stored pair read the other way round (flips.swap): same items, sides exchanged
    const counts = {};
    Object.keys(f.counts).forEach(function(k){ counts[SWAP[k] || k] = f.counts[k]; });
    const order = CHANGES[f.kind];
    const items = f.items.map(function(it){
      return {label: it.label, change: SWAP[it.change], a: it.b, b: it.a}; });
    items.sort(function(x, y){ return order.indexOf(x.change) - order.indexOf(y.change); });
    return {f: Object.assign({}, f, {counts: counts, items: items}), paired: f.paired[1]};
  }
  function score(x, kind){ return kind === 'nll' ? x.toFixed(4) : show(x); }
  function signed(x){ return (x >= 0 ? '+' : '') + x.toFixed(4); }
  function lines(list, key){ return list.map(function(w){ return esc(w[key]); }).join('<br>'); }
  function queries(wa, wb){
    // one query per window: one run's when only one retrieved, both when they differ
    const n = Math.max(wa.length, wb.length), out = [];
    for (let k = 0; k < n; k++) {
      const x = (wa[k] || {}).query || '', y = (wb[k] || {}).query || '';
      out.push({q: !y || x === y ? x : (!x ? y : x + ' / ' + y)});
    }
    return out;
  }
  function flipsHtml(sel){
    if (sel.length !== 2) return '<h3>Per-sample flips</h3><p id="flips-none">Select exactly two runs of one experiment to list the questions or blocks whose outcome changed.</p>';
    const a = sel[0], b = sel[1], p = pairFlips(a, b);
    if (!p) return '<h3>Per-sample flips</h3><p id="flips-none">None: the two runs belong to different experiments.</p>';
    const f = p.f;
    if (f.why) return '<h3>Per-sample flips</h3><p id="flips-none">None: ' + esc(f.why) + '.</p>';
    const ta = flipsData.texts[String(a)] || {}, tb = flipsData.texts[String(b)] || {};
    const names = '[1] ' + esc(runs[a].experiment + '/' + runs[a].run_id) + ', [2] ' + esc(runs[b].experiment + '/' + runs[b].run_id);
    const cHead = COUNTS[f.kind].map(function(k){ return '<th>' + FLIP_LABELS[k] + '</th>'; }).join('');
    const cRow = COUNTS[f.kind].map(function(k){ return '<td class="num">' + f.counts[k] + '</td>'; }).join('');
    let head, rows;
    if (f.kind === 'outcome') {
      head = ['change', 'id', 'question', 'gold', '[1] output', '[2] output', '[1] ' + f.metric, '[2] ' + f.metric, '[1] finish', '[2] finish'];
      rows = f.items.map(function(it){
        const x = ta[it.label] || {}, y = tb[it.label] || {};
        return '<tr data-key="' + esc(it.label) + '" data-change="' + it.change + '"><td>' + FLIP_LABELS[it.change] + '</td><td>' + esc(it.label) + '</td><td>' +
          esc(x.question || y.question || '') + '</td><td>' + esc(x.gold || y.gold || '') + '</td><td>' + esc(x.output || '') + '</td><td>' + esc(y.output || '') +
          '</td><td class="num">' + score(it.a, f.kind) + '</td><td class="num">' + score(it.b, f.kind) + '</td><td>' + esc(x.finish || '') + '</td><td>' + esc(y.finish || '') + '</td></tr>';
      }).join('');
    } else {
      head = ['change', 'block', 'NLL per ' + f.per + ' [1]', '[2]', 'change', 'window', 'query', '[1] document', '[2] document'];
      rows = f.items.map(function(it){
        const wa = ta[it.label] || [], wb = tb[it.label] || [];
        const win = (wa.length >= wb.length ? wa : wb);
        return '<tr data-key="' + esc(it.label) + '" data-change="' + it.change + '"><td>' + FLIP_LABELS[it.change] + '</td><td>' + esc(it.label) + '</td><td class="num">' +
          score(it.a, f.kind) + '</td><td class="num">' + score(it.b, f.kind) + '</td><td class="num">' + signed(it.b - it.a) + '</td><td>' + lines(win, 'window') +
          '</td><td>' + lines(queries(wa, wb), 'q') + '</td><td>' + lines(wa, 'doc') + '</td><td>' + lines(wb, 'doc') + '</td></tr>';
      }).join('');
    }
    const listed = CHANGES[f.kind].map(function(k){
      const shown = f.items.filter(function(it){ return it.change === k; }).length;
      return FLIP_LABELS[k] + ' ' + shown + ' of ' + f.counts[k]; }).join(', ');
    return '<h3>Per-sample flips: [2] against [1]</h3><p>' + names + '</p>' +
      '<p id="flips-rule">' + esc(f.metric + ' on ' + f.n + ' ' + f.unit + '; ' + f.rule) + '</p>' +
      '<table id="flips-counts"><tr>' + cHead + '</tr><tr>' + cRow + '</tr></table>' +
      '<p id="flips-paired">paired ' + esc(f.metric) + ' ([2] - [1]): ' + esc(p.paired) + '</p>' +
      '<p class="hint">Listed (' + esc(f.ordered_by) + '): ' + listed + '; all of them: <code>ragrepro compare ' +
      esc(runs[a].run_id + ' ' + runs[b].run_id) + ' --flips --limit 0</code>.</p>' +
      '<div class="scroll"><table id="flips-items"><tr>' + head.map(function(h){ return '<th>' + esc(h) + '</th>'; }).join('') + '</tr>' + rows + '</table></div>';
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
