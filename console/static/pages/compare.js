// The compare page (#/compare): ComparePercentiles by model, engine, a
// fleet-file label or node, for one latency metric. A bar chart at the
// chosen quantile (each bar with its bucket drawn as a range, its rank, ≈
// where the value is within bucket resolution of the median, ! for an
// outlier) and a table of every quantile beside it. The form's state is
// the hash query: #/compare?by=model&metric=ttft&q=0.99&window=5m
// (&label=team with by=label, &nodes=a,b to compare only those).

import { num, fmtSeconds, fmtNumber, rangeBars, ensureStyles } from '../charts.js';

const METRICS = [
  ['ttft', 'LATENCY_METRIC_TTFT', 'TTFT (time to first token)'],
  ['e2e', 'LATENCY_METRIC_E2E', 'E2E (end-to-end)'],
  ['itl', 'LATENCY_METRIC_INTER_TOKEN', 'Inter-token latency'],
  ['tpot', 'LATENCY_METRIC_TIME_PER_OUTPUT_TOKEN', 'Time per output token'],
  ['queue_time', 'LATENCY_METRIC_QUEUE_TIME', 'Queue time'],
];
const GROUPS = [
  ['model', 'GROUP_BY_MODEL', 'Model'],
  ['engine', 'GROUP_BY_ENGINE', 'Engine'],
  ['label', 'GROUP_BY_LABEL', 'Label'],
  ['node', 'GROUP_BY_NODE', 'Node'],
];
const QUANTILES = ['0.5', '0.9', '0.95', '0.99', '0.999'];
const WINDOWS = ['1m', '5m', '15m', '1h', 'lifetime'];
// MAX_NODES bounds the node ids taken from the form (the service's own
// limit per comparison is 1,000).
const MAX_NODES = 1000;

function h(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat()) {
    if (k === null || k === undefined || k === false) continue;
    e.append(k);
  }
  return e;
}

function select(id, label, options, value) {
  const s = h('select', { id, name: id },
    options.map(([v, , text]) => h('option', { value: v, selected: v === value, text: text || v })));
  return [h('label', { for: id }, label, s), s];
}

function qname(q) {
  return 'P' + String(Number((q * 100).toFixed(2)));
}

// state reads the form's state from the hash query, defaulting what is
// missing or unknown.
export function state(query) {
  const pick = (k, list, d) => (list.some((x) => x[0] === query.get(k)) ? query.get(k) : d);
  const q = Number(query.get('q'));
  return {
    by: pick('by', GROUPS, 'model'),
    metric: pick('metric', METRICS, 'ttft'),
    q: q > 0 && q < 1 ? q : 0.99,
    window: query.get('window') || '5m',
    label: (query.get('label') || '').slice(0, 128),
    nodes: (query.get('nodes') || '').split(',').map((s) => s.trim()).filter(Boolean).slice(0, MAX_NODES),
  };
}

export function render(root, params, ctx) {
  const { api, nav, signal } = ctx;
  ensureStyles();
  document.title = 'Compare · llmdiag';
  let st = state(params.query);
  let seq = 0;

  const [byLabel, bySel] = select('cmp-by', 'Group by', GROUPS, st.by);
  const [metricLabel, metricSel] = select('cmp-metric', 'Metric', METRICS, st.metric);
  const qs = QUANTILES.includes(String(st.q)) ? QUANTILES : [...QUANTILES, String(st.q)];
  const [qLabel, qSel] = select('cmp-q', 'Quantile', qs.map((q) => [q, null, qname(Number(q))]), String(st.q));
  const [wLabel, wSel] = select('cmp-window', 'Window', WINDOWS.includes(st.window) ? WINDOWS.map((w) => [w]) : [...WINDOWS, st.window].map((w) => [w]), st.window);
  const labelIn = h('input', { id: 'cmp-label', name: 'label', value: st.label, list: 'cmp-label-keys', autocomplete: 'off', size: 10 });
  const labelKeys = h('datalist', { id: 'cmp-label-keys' });
  const labelWrap = h('label', { for: 'cmp-label' }, 'Label key', labelIn, labelKeys);
  const nodesIn = h('input', { id: 'cmp-nodes', name: 'nodes', value: st.nodes.join(','), placeholder: 'all nodes', autocomplete: 'off', size: 18 });
  const nodesWrap = h('label', { for: 'cmp-nodes' }, 'Nodes (comma-separated)', nodesIn);
  const go = h('button', { type: 'submit', text: 'Compare' });
  const form = h('form', { class: 'compare-form', 'aria-label': 'Comparison' },
    byLabel, metricLabel, qLabel, wLabel, labelWrap, nodesWrap, go);
  const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const chart = h('div', { class: 'compare-chart' });
  const table = h('div', { class: 'table-wrap' });
  root.append(h('h1', { text: 'Compare percentiles' }), form, status,
    h('div', { class: 'compare-layout' }, chart, table));

  function syncLabel() { labelWrap.hidden = bySel.value !== 'label'; }
  syncLabel();

  function readForm() {
    return {
      by: bySel.value, metric: metricSel.value, q: Number(qSel.value), window: wSel.value,
      label: labelIn.value.trim(),
      nodes: nodesIn.value.split(',').map((s) => s.trim()).filter(Boolean).slice(0, MAX_NODES),
    };
  }

  function toQuery(s) {
    const q = new URLSearchParams({ by: s.by, metric: s.metric, q: String(s.q), window: s.window });
    if (s.by === 'label' && s.label) q.set('label', s.label);
    if (s.nodes.length) q.set('nodes', s.nodes.join(','));
    return q;
  }

  async function load() {
    const n = ++seq;
    const s = st;
    if (s.by === 'label' && !s.label) {
      status.textContent = 'Name the label to group by (a key from the fleet file\'s labels).';
      chart.replaceChildren();
      table.replaceChildren();
      return;
    }
    const quantiles = [...new Set([0.5, 0.95, 0.99, s.q])].sort((a, b) => a - b);
    const req = {
      metric: METRICS.find((m) => m[0] === s.metric)[1],
      groupBy: GROUPS.find((g) => g[0] === s.by)[1],
      quantiles, window: s.window,
    };
    if (s.by === 'label') req.label = s.label;
    if (s.nodes.length) req.nodes = s.nodes;
    status.textContent = 'Loading…';
    let res;
    try {
      res = await api.unary('ComparePercentiles', req, { signal });
    } catch (err) {
      if (n !== seq || (err && err.code === 'canceled')) return;
      status.textContent = '';
      chart.replaceChildren(h('div', { class: 'banner error', role: 'alert', text: 'Could not compare: ' + (err.code ? err.code + ': ' : '') + err.message }));
      table.replaceChildren();
      return;
    }
    if (n !== seq) return;
    draw(s, res);
  }

  function draw(s, res) {
    const quantiles = (res.quantiles || []).map(num);
    const qi = quantiles.findIndex((q) => Math.abs(q - s.q) < 1e-9);
    const metricName = METRICS.find((m) => m[0] === s.metric)[2];
    const rows = (res.rows || []).map((row) => {
      const v = (row.values || [])[qi] || {};
      const p = v.percentile || {};
      return {
        label: row.subject || '(none)',
        value: num(p.value), lo: num(p.lowerBound), hi: num(p.upperBound),
        rank: num(v.rank), approx: !!v.withinResolution, outlier: !!row.outlier, note: row.note || '',
        row,
      };
    });
    rows.sort((a, b) => (a.rank || Infinity) - (b.rank || Infinity) || a.label.localeCompare(b.label));
    const title = `${metricName} ${qname(s.q)} by ${s.by === 'label' ? 'label ' + s.label : s.by}`;
    status.textContent = `${rows.length} ${rows.length === 1 ? 'subject' : 'subjects'} · window ${res.window || s.window}` +
      (res.degraded ? ' · from a replica\'s own copy' : '');
    const svg = rangeBars('compare', title, rows, fmtSeconds, { heading: false });
    chart.replaceChildren(h('h2', { text: title }), svg,
      h('p', { class: 'muted chart-note', text: 'Bars run to the value; the whisker is the histogram bucket it lies in. #n is the rank (1 fastest; equal values in one bucket share a rank). ≈: within bucket resolution of the median, the histograms cannot tell it apart. !: an outlier, markedly slower than the median.' }));
    const head = h('tr', {}, h('th', { scope: 'col', text: 'Subject' }),
      quantiles.map((q) => h('th', { scope: 'col', class: 'num', text: qname(q) })),
      h('th', { scope: 'col', class: 'num', text: 'Tail' }), h('th', { scope: 'col', class: 'num', text: 'Count' }));
    const body = rows.map(({ row, outlier }) => h('tr', { class: outlier ? 'outlier' : null, 'data-subject': row.subject || '' },
      h('th', { scope: 'row' }, row.subject || '(none)',
        outlier ? h('span', { class: 'approx', title: 'outlier', text: ' !' }) : null,
        row.nodes && row.nodes.length && s.by !== 'node'
          ? h('div', { class: 'muted', text: row.nodes.join(', ') }) : null,
        row.note ? h('div', { class: 'muted', text: row.note }) : null),
      quantiles.map((q, i) => {
        const v = (row.values || [])[i] || {};
        const p = v.percentile || {};
        const val = num(p.value);
        if (!num(v.rank) || !Number.isFinite(val)) return h('td', { class: 'num', text: '—' });
        return h('td', { class: 'num', 'data-rank': num(v.rank) },
          '#' + num(v.rank) + ' ' + fmtSeconds(val),
          v.withinResolution ? h('span', { class: 'approx', title: 'within bucket resolution of the median', text: ' ≈' }) : null,
          h('div', { class: 'muted', text: fmtSeconds(num(p.lowerBound)) + '–' + fmtSeconds(num(p.upperBound)) }));
      }),
      h('td', { class: 'num', text: num(row.tailRatio) ? fmtNumber(num(row.tailRatio)) + '×' : '—' }),
      h('td', { class: 'num', text: fmtNumber(num(row.count)) })));
    table.replaceChildren(h('table', { id: 'compare-table' },
      h('caption', { class: 'sr-only', text: title }), h('thead', {}, head), h('tbody', {}, body)));
  }

  form.addEventListener('submit', (e) => {
    e.preventDefault();
    st = readForm();
    nav.setQuery(toQuery(st));
    load();
  });
  for (const sel of [bySel, metricSel, qSel, wSel]) {
    sel.addEventListener('change', () => {
      syncLabel();
      if (bySel.value === 'label' && !labelIn.value.trim()) { labelIn.focus(); return; }
      form.requestSubmit();
    });
  }

  // The label keys and node ids the fleet has, as suggestions.
  api.unary('ListNodes', {}, { signal }).then((res) => {
    const keys = new Set();
    for (const n of res.nodes || []) for (const k of Object.keys(n.labels || {})) keys.add(k);
    labelKeys.replaceChildren(...[...keys].sort().map((k) => h('option', { value: k })));
  }).catch(() => { /* suggestions only */ });

  load();
  return () => { seq++; };
}
