// The node page (#/node/<id>): the seed's table for one node (indicator,
// value, status, conclusion) in English or Chinese, then the root cause,
// its evidence, what was ruled out and the recommendations; charts of the
// latency percentiles with their bucket bounds, the window's bucket counts,
// and sparklines over the node's history; and the grpcurl and curl commands
// that fetch the same data.
//
// Reads: DiagnoseNode (the language asked for), GetNodeMetrics (default
// window) and GetNodeHistory (when the service has it: an older service
// answers Unimplemented, and the page says history is not available).
// The language is kept in the hash query (?lang=zh).

import {
  num, fmtSeconds, fmtNumber, fmtPercent, percentileChart, histogram, sparkline, ensureStyles,
} from '../charts.js';

// UI strings; the findings, summary, evidence, ruled-out and
// recommendations come localized from the API.
const T = {
  en: {
    indicator: 'Indicator', value: 'Value', status: 'Status', conclusion: 'Conclusion',
    verdict: 'Verdict', rootCause: 'Root cause', evidence: 'Evidence', ruledOut: 'Ruled out',
    recommendations: 'Recommendations', confidence: 'confidence', routable: 'routable',
    notRoutable: 'not routable', load: 'load score', window: 'window', figures: 'figures',
    lang: '中文', langLabel: 'Show the report in Chinese',
  },
  zh: {
    indicator: '指标', value: '数值', status: '状态', conclusion: '结论',
    verdict: '诊断', rootCause: '根本原因', evidence: '证据', ruledOut: '已排除',
    recommendations: '建议', confidence: '置信度', routable: '可路由',
    notRoutable: '不可路由', load: '负载分', window: '窗口', figures: '依据',
    lang: '中文', langLabel: '以中文显示报告',
  },
};

const CAUSES = {
  CAUSE_NO_DATA: ['No data', '无数据'],
  CAUSE_TARGET_DOWN: ['Target down', '目标不可达'],
  CAUSE_KV_EXHAUSTED: ['KV cache exhausted', 'KV Cache 耗尽'],
  CAUSE_OVERLOADED: ['Overloaded', '过载'],
  CAUSE_BURST: ['Burst', '突发流量'],
  CAUSE_PREFILL_BOUND: ['Prefill-bound', 'Prefill 瓶颈'],
  CAUSE_DECODE_BOUND: ['Decode-bound', 'Decode 瓶颈'],
  CAUSE_NODE_OUTLIER: ['Outlier among its peers', '同模型节点中的异常'],
  CAUSE_HEALTHY: ['Healthy', '健康'],
  CAUSE_UNEXPLAINED: ['Unexplained', '无法解释'],
  CAUSE_STALLED: ['Stalled', '停滞'],
  CAUSE_LORA_CONTENTION: ['LoRA adapter contention', 'LoRA 适配器争用'],
};

const STATUS = {
  STATUS_OK: ['OK', '正常'],
  STATUS_WARN: ['WARN', '警告'],
  STATUS_CRIT: ['CRIT', '严重'],
  STATUS_UNKNOWN: ['UNKNOWN', '未知'],
  STATUS_DOWN: ['DOWN', '宕机'],
};

const ENGINES = {
  ENGINE_VLLM: 'vLLM', ENGINE_SGLANG: 'SGLang', ENGINE_TRTLLM: 'TensorRT-LLM',
  ENGINE_TRITON: 'Triton', ENGINE_TGI: 'TGI', ENGINE_DYNAMO: 'Dynamo',
};

// HISTORY_LIMIT bounds the history points asked for (the sparklines draw
// at most this many).
const HISTORY_LIMIT = 360;

const DISTS = [
  ['ttft', 'TTFT', 'ttft'],
  ['e2e', 'E2E', 'e2e'],
  ['itl', 'Inter-token', 'interToken'],
];

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

function statusBadge(status, lang) {
  const s = status || 'STATUS_UNSPECIFIED';
  const cls = 's-' + s.replace(/^STATUS_/, '').toLowerCase();
  const label = (STATUS[s] || [s.replace(/^STATUS_/, ''), s.replace(/^STATUS_/, '')])[lang === 'zh' ? 1 : 0];
  return h('span', { class: 'status ' + cls, 'data-status': s, text: label });
}

function causeLabel(cause, lang) {
  const c = CAUSES[cause];
  return c ? c[lang === 'zh' ? 1 : 0] : (cause || 'CAUSE_UNSPECIFIED').replace(/^CAUSE_/, '');
}

function list(items, cls) {
  if (!items || !items.length) return h('p', { class: 'muted', text: '—' });
  return h('ul', { class: cls }, items.map((s) => h('li', { text: s })));
}

// shellQuote quotes s for a POSIX shell.
function shellQuote(s) {
  return "'" + String(s).replace(/'/g, "'\\''") + "'";
}

// commands: the grpcurl and curl lines that fetch what the page shows,
// against this service's address, with a placeholder for the token.
export function commands(loc, node, lang, withToken) {
  const https = loc.protocol === 'https:';
  const host = loc.host;
  const base = `${loc.protocol}//${host}/llmdiag.v1.DiagnosisService/`;
  const diag = JSON.stringify({ node, language: lang === 'zh' ? 'LANGUAGE_ZH' : 'LANGUAGE_EN' });
  const metrics = JSON.stringify({ node });
  const hist = JSON.stringify({ node, limit: HISTORY_LIMIT });
  const g = (req, m) => [
    'grpcurl', https ? '' : '-plaintext',
    withToken ? `-H ${shellQuote('authorization: Bearer ')}"$LLMDIAG_TOKEN"` : '',
    '-d', shellQuote(req), host, 'llmdiag.v1.DiagnosisService/' + m,
  ].filter(Boolean).join(' ');
  const c = (req, m) => [
    'curl -s', withToken ? '-H "Authorization: Bearer $LLMDIAG_TOKEN"' : '',
    "-H 'Content-Type: application/json'", '-d', shellQuote(req), base + m,
  ].filter(Boolean).join(' ');
  return {
    grpcurl: [g(diag, 'DiagnoseNode'), g(metrics, 'GetNodeMetrics'), g(hist, 'GetNodeHistory')].join('\n'),
    curl: [c(diag, 'DiagnoseNode'), c(metrics, 'GetNodeMetrics'), c(hist, 'GetNodeHistory')].join('\n'),
  };
}

// copyText puts text on the clipboard; where the Clipboard API is not
// available (plain http to another host), it selects pre for Ctrl+C.
async function copyText(text, pre, say) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      say('Copied.');
      return;
    }
  } catch { /* fall through to selecting */ }
  const range = document.createRange();
  range.selectNodeContents(pre);
  const sel = window.getSelection();
  sel.removeAllRanges();
  sel.addRange(range);
  let ok = false;
  try { ok = document.execCommand('copy'); } catch { ok = false; }
  say(ok ? 'Copied.' : 'Selected: press Ctrl+C (⌘C) to copy.');
}

export function render(root, params, ctx) {
  const { api, nav, signal } = ctx;
  const id = params.id;
  ensureStyles();
  let lang = params.query.get('lang') === 'zh' ? 'zh' : 'en';
  // seq numbers each load of the charts and history, rep each load of the
  // report: an answer older than the newest ask is dropped.
  let seq = 0;
  let rep = 0;

  document.title = id + ' · llmdiag';
  const toggle = h('button', {
    id: 'lang-toggle', type: 'button', class: 'secondary',
    'aria-pressed': lang === 'zh' ? 'true' : 'false', 
  }, '中文 (Chinese)');
  const refresh = h('button', { type: 'button', class: 'linkish', text: 'Refresh' });
  const head = h('div', { class: 'node-head' },
    h('p', { class: 'crumbs' }, h('a', { href: nav.href('/'), text: '← Fleet' })),
    h('div', { class: 'node-title' },
      h('h1', { text: id }),
      h('div', { class: 'node-actions' }, toggle, refresh)),
  );
  const meta = h('p', { class: 'node-meta muted', 'aria-live': 'polite' }, 'Loading…');
  const report = h('div', { class: 'node-report', lang: lang === 'zh' ? 'zh-CN' : 'en' });
  const charts = h('section', { class: 'node-charts', 'aria-labelledby': 'charts-h' });
  const history = h('section', { class: 'node-history', 'aria-labelledby': 'history-h' });
  const cmds = h('section', { class: 'node-cmds', 'aria-labelledby': 'cmds-h' });
  const body = h('div', { class: 'node-body' }, meta, report, charts, history, cmds);
  root.append(head, body);

  function fail(err, where) {
    if (err && err.code === 'canceled') return;
    if (err && err.code === 'not_found') {
      body.replaceChildren(h('div', { class: 'banner error', id: 'no-such-node', role: 'alert' },
        h('span', {}, 'No such node: ', h('code', { text: id }), '. ',
          h('a', { href: nav.href('/'), text: 'See the fleet' }), ' for the nodes llmdiag knows.')));
      toggle.hidden = true;
      refresh.hidden = true;
      return;
    }
    const msg = (err && (err.code ? err.code + ': ' : '') + err.message) || String(err);
    where.replaceChildren(h('div', { class: 'banner error', role: 'alert', text: 'Could not load: ' + msg }));
  }

  async function loadReport(n) {
    const res = await api.unary('DiagnoseNode', {
      node: id, language: lang === 'zh' ? 'LANGUAGE_ZH' : 'LANGUAGE_EN',
    }, { signal });
    if (n !== rep) return;
    renderReport(res.diagnosis || {}, res.degraded);
  }

  function renderReport(d, degraded) {
    const t = T[lang];
    report.setAttribute('lang', lang === 'zh' ? 'zh-CN' : 'en');
    meta.replaceChildren(
      statusBadge(d.status, lang), ' ',
      [d.model, ENGINES[d.engine] || d.engine, t.window + ' ' + (d.window || '')].filter(Boolean).join(' · '),
      ' · ', d.routable ? t.routable : t.notRoutable,
      ' · ', t.load + ' ' + fmtNumber(num(d.loadScore)),
      d.stale ? ' · stale' : '',
    );
    const rows = (d.findings || []).map((f) => h('tr', {
      'data-indicator': f.indicator || 'INDICATOR_UNSPECIFIED', 'data-status': f.status || 'STATUS_UNSPECIFIED',
    },
    h('th', { scope: 'row', text: f.name || f.indicator }),
    h('td', { class: 'num', text: f.value || '—' }),
    h('td', {}, statusBadge(f.status, lang)),
    h('td', {}, f.conclusion || '',
      f.evidence && f.evidence.length
        ? h('details', { class: 'fig' }, h('summary', { text: t.figures }), list(f.evidence))
        : null)));
    const table = h('table', { id: 'findings', class: 'findings' },
      h('caption', { class: 'sr-only', text: t.verdict }),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col', text: t.indicator }), h('th', { scope: 'col', text: t.value }),
        h('th', { scope: 'col', text: t.status }), h('th', { scope: 'col', text: t.conclusion }))),
      h('tbody', {}, rows));
    const cause = d.rootCause || 'CAUSE_UNSPECIFIED';
    report.replaceChildren(...[
      degraded ? h('div', { class: 'banner warn', text: 'From a replica\'s own copy: ' + (degraded.reason || '') }) : null,
      h('h2', { text: t.verdict }),
      h('div', { class: 'table-wrap' }, table),
      h('section', { id: 'root-cause', 'data-cause': cause, class: 'root-cause ' + statusClass(d.status), 'aria-labelledby': 'rc-h' },
        h('h2', { id: 'rc-h' }, t.rootCause + ': ', h('span', { class: 'cause', text: causeLabel(cause, lang) })),
        h('p', { class: 'summary', text: d.summary || '' }),
        h('p', { class: 'muted', text: t.confidence + ' ' + fmtPercent(num(d.confidence)) })),
      h('div', { class: 'report-cols' },
        h('section', {}, h('h3', { text: t.evidence }), list(d.evidence)),
        h('section', {}, h('h3', { text: t.ruledOut }), list(d.ruledOut)),
        h('section', {}, h('h3', { text: t.recommendations }), list(d.recommendations, 'recs'))),
    ].filter(Boolean));
    toggle.setAttribute('aria-pressed', lang === 'zh' ? 'true' : 'false');
    toggle.disabled = false;
    renderCommands();
  }

  async function loadMetrics(n) {
    const res = await api.unary('GetNodeMetrics', { node: id }, { signal });
    if (n !== seq) return;
    const m = res.metrics || {};
    const cards = DISTS.map(([key, label, field]) => h('figure', { class: 'chart-card' },
      percentileChart('percentiles-' + key, label, m[field]),
      histogram('histogram-' + key, label, m[field]),
      h('figcaption', { class: 'muted', text: distCaption(m[field]) })));
    charts.replaceChildren(
      h('h2', { id: 'charts-h', text: 'Latency · ' + (m.window || 'default window') }),
      h('p', { class: 'muted chart-note', text: 'Each percentile is drawn at its value over the histogram bucket it lies in: the band is the resolution the histogram allows. Axes are logarithmic; the bars are the window\'s observations per bucket.' }),
      h('div', { class: 'chart-grid' }, cards));
  }

  async function loadHistory(n) {
    let res;
    try {
      res = await api.unary('GetNodeHistory', { node: id, limit: HISTORY_LIMIT }, { signal });
    } catch (err) {
      if (n !== seq) return;
      if (err && (err.code === 'unimplemented' || err.code === 'not_found')) {
        history.replaceChildren(h('h2', { id: 'history-h', text: 'History' }),
          h('p', { class: 'muted', id: 'history-na', text: 'History not available from this service.' }));
        return;
      }
      throw err;
    }
    if (n !== seq) return;
    const pts = res.points || [];
    const opt = (v) => (v === undefined || v === null ? NaN : num(v));
    const series = (f) => pts.map((p) => ({ t: Date.parse(p.at), v: f(p) }));
    const spans = pts.length
      ? `${pts.length} refreshes, ${new Date(Date.parse(pts[0].at)).toLocaleTimeString()} – ${new Date(Date.parse(pts[pts.length - 1].at)).toLocaleTimeString()}`
      : 'no refreshes kept yet';
    const items = [
      ['spark-queue', 'Queue', series((p) => opt(p.queue)), fmtNumber],
      ['spark-running', 'Running', series((p) => opt(p.running)), fmtNumber],
      ['spark-kv', 'KV pressure', series((p) => opt(p.kvPressure)), fmtPercent],
      ['spark-e2e-p99', 'E2E P99', series((p) => opt(p.e2eP99Seconds !== undefined ? p.e2eP99Seconds : p.e2eP99)), fmtSeconds],
    ];
    const noP99 = pts.length > 0 && !items[3][2].some((p) => Number.isFinite(p.v));
    history.replaceChildren(
      h('h2', { id: 'history-h', text: 'History' }),
      h('p', { class: 'muted', text: spans + (noP99
        ? '. E2E P99 is kept once the service has watched the node for a whole window.' : '') }),
      h('dl', { class: 'sparks' }, items.map(([name, label, vals, fmt]) => {
        const last = [...vals].reverse().find((p) => Number.isFinite(p.v));
        return h('div', { class: 'spark' },
          h('dt', { text: label }),
          h('dd', {}, sparkline(name, label + ' over the history', vals, fmt),
            h('span', { class: 'spark-last', text: last ? fmt(last.v) : '—' })));
      })));
  }

  const say = (s) => { copyStatus.textContent = s; };
  const copyStatus = h('span', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  function renderCommands() {
    const c = commands(location, id, lang, !!api.getToken());
    const block = (name, text) => {
      const pre = h('pre', { class: 'cmd', id: 'cmd-' + name, tabindex: '0' }, h('code', { text }));
      const btn = h('button', { type: 'button', class: 'linkish copy', 'data-copy': name, text: 'Copy' });
      btn.addEventListener('click', () => copyText(text, pre, say));
      return h('div', { class: 'cmd-block' }, h('div', { class: 'cmd-head' }, h('h3', { text: name }), btn), pre);
    };
    cmds.replaceChildren(
      h('h2', { id: 'cmds-h', text: 'Fetch the same data' }),
      h('p', { class: 'muted', text: api.getToken()
        ? 'Set LLMDIAG_TOKEN to your token first; it is not copied here.'
        : 'With a token-protected service, add -H "Authorization: Bearer $LLMDIAG_TOKEN".' }),
      block('grpcurl', c.grpcurl), block('curl', c.curl), copyStatus);
  }

  async function load() {
    const n = ++seq;
    const parts = [
      loadReport(++rep).catch((e) => fail(e, report)),
      loadMetrics(n).catch((e) => { if (!(e && e.code === 'not_found')) fail(e, charts); }),
      loadHistory(n).catch((e) => { if (!(e && e.code === 'not_found')) fail(e, history); }),
    ];
    await Promise.all(parts);
  }

  toggle.addEventListener('click', async () => {
    lang = lang === 'zh' ? 'en' : 'zh';
    toggle.setAttribute('aria-pressed', lang === 'zh' ? 'true' : 'false');
    toggle.disabled = true;
    const q = new URLSearchParams(params.query);
    if (lang === 'zh') q.set('lang', 'zh'); else q.delete('lang');
    nav.setQuery(q);
    try { await loadReport(++rep); } catch (e) { fail(e, report); } finally { toggle.disabled = !!body.querySelector('#no-such-node'); }
  });
  refresh.addEventListener('click', () => { load(); });

  load();
  return () => { seq++; rep++; };
}

function statusClass(s) {
  return 's-' + (s || 'STATUS_UNSPECIFIED').replace(/^STATUS_/, '').toLowerCase();
}

function distCaption(d) {
  if (!d) return 'not exported by this engine';
  const n = num(d.count);
  const mean = d.mean === undefined ? NaN : num(d.mean);
  return `${fmtNumber(n)} observations` + (Number.isFinite(mean) ? `, mean ${fmtSeconds(mean)}` : '');
}
