// charts.js: small SVG chart builders for the console, no libraries.
//
// Every builder returns an <svg> element with role="img", an aria-label that
// summarises it, a <title>, a <desc> listing every value as text (the text
// fallback), data-chart="<name>" and data-points="<n>" (the number of points
// or bars actually drawn; the browser tests read it). Styling is by class
// (app.css) with presentation attributes as defaults, never style="".
//
// The inputs are the API's JSON (protojson): doubles may arrive as the
// strings "NaN", "Infinity" and "-Infinity", and a field that is zero is
// absent; num() reads all of those.

const SVG = 'http://www.w3.org/2000/svg';

/**
 * ensureStyles adds, once, <link rel="stylesheet" href="/console/charts.css">
 * (the charts' and the node and compare pages' styles): a stylesheet from
 * this origin, as the CSP allows.
 */
export function ensureStyles() {
  if (document.getElementById('charts-css')) return;
  const l = document.createElement('link');
  l.id = 'charts-css';
  l.rel = 'stylesheet';
  l.href = '/console/charts.css';
  document.head.append(l);
}

/** num reads a protojson double: numbers, "NaN", "Infinity", absent = 0. */
export function num(v) {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number') return v;
  if (v === 'Infinity') return Infinity;
  if (v === '-Infinity') return -Infinity;
  if (v === 'NaN') return NaN;
  const f = Number(v);
  return Number.isNaN(f) ? NaN : f;
}

/** fmtSeconds prints a duration in seconds with a unit a person reads. */
export function fmtSeconds(s) {
  if (s === Infinity) return '+Inf';
  if (!Number.isFinite(s)) return '–';
  const a = Math.abs(s);
  if (a === 0) return '0';
  if (a < 1e-3) return trim(s * 1e6) + ' µs';
  if (a < 1) return trim(s * 1e3) + ' ms';
  if (a < 120) return trim(s) + ' s';
  return trim(s / 60) + ' min';
}

/** fmtNumber prints a plain figure with up to three significant digits. */
export function fmtNumber(v) {
  if (v === Infinity) return '+Inf';
  if (!Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a >= 1e6) return trim(v / 1e6) + 'M';
  if (a >= 1e4) return trim(v / 1e3) + 'k';
  return trim(v);
}

/** fmtPercent prints a 0..1 share as a percentage. */
export function fmtPercent(v) {
  if (!Number.isFinite(v)) return '–';
  return trim(v * 100) + '%';
}

// fmtTick labels an axis tick: seconds from 1 s up, so decades read 1 s,
// 10 s, 100 s, 1000 s.
function fmtTick(s) {
  return s >= 1 ? trim(s) + ' s' : fmtSeconds(s);
}

function trim(v) {
  const a = Math.abs(v);
  const d = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  return String(Number(v.toFixed(d)));
}

function el(tag, attrs, ...kids) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, String(v));
  }
  for (const k of kids) {
    if (k === null || k === undefined) continue;
    e.append(typeof k === 'string' ? document.createTextNode(k) : k);
  }
  return e;
}

function text(x, y, s, attrs) {
  return el('text', { x: r(x), y: r(y), ...attrs }, s);
}

function r(v) {
  return Math.round(v * 10) / 10;
}

// frame makes the <svg> with its accessible name and text fallback.
function frame(name, label, w, h, summary, lines) {
  const svg = el('svg', {
    viewBox: `0 0 ${w} ${h}`,
    width: '100%',
    role: 'img',
    class: 'chart chart-' + name.split('-')[0],
    'data-chart': name,
    'aria-label': summary ? `${label}: ${summary}` : label,
    'font-size': 12,
    'font-family': 'system-ui, sans-serif',
  });
  svg.append(el('title', {}, label));
  svg.append(el('desc', {}, lines.length ? lines.join('; ') : 'no data'));
  return svg;
}

function setPoints(svg, n) {
  svg.setAttribute('data-points', String(n));
  return svg;
}

// logScale maps [lo, hi] (both > 0) onto [x0, x1] logarithmically.
function logScale(lo, hi, x0, x1) {
  const a = Math.log10(lo);
  const b = Math.log10(hi);
  const f = (v) => {
    if (!(v > 0)) return x0;
    if (v === Infinity) return x1;
    const t = (Math.log10(v) - a) / (b - a);
    return x0 + Math.min(1, Math.max(0, t)) * (x1 - x0);
  };
  return f;
}

// logTicks: the decades in [lo, hi], with 2 and 5 between them when the
// range spans few decades.
function logTicks(lo, hi) {
  const ticks = [];
  const d0 = Math.round(Math.log10(lo));
  const d1 = Math.round(Math.log10(hi));
  const fine = d1 - d0 <= 1;
  for (let d = d0; d <= d1; d++) {
    for (const m of fine ? [1, 2, 5] : [1]) {
      const v = m * 10 ** d;
      if (v >= lo * 0.999 && v <= hi * 1.001) ticks.push(v);
    }
  }
  return ticks;
}

/**
 * percentileChart draws one latency distribution's percentiles (P50, P95,
 * P99 from Distribution.percentiles) on a logarithmic axis: each as a point
 * at its value over a band from its bucket's lower to upper bound, so the
 * histogram's resolution is visible. A bound of 0 or +Inf draws the band
 * open to the axis edge.
 *
 * @param {string} name  data-chart value, e.g. "percentiles-ttft"
 * @param {string} label human name, e.g. "TTFT"
 * @param {object} dist  the Distribution JSON (or undefined)
 */
export function percentileChart(name, label, dist) {
  const ps = ((dist && dist.percentiles) || []).map((p) => ({
    q: num(p.quantile),
    v: num(p.value),
    lo: num(p.lowerBound),
    hi: num(p.upperBound),
  }));
  const drawn = ps.filter((p) => Number.isFinite(p.v));
  const lines = ps.map((p) => {
    const qn = 'P' + trim(p.q * 100);
    if (!Number.isFinite(p.v)) return `${qn} no observations`;
    return `${qn} ${fmtSeconds(p.v)} (bucket ${fmtSeconds(p.lo)}–${fmtSeconds(p.hi)})`;
  });
  const W = 420;
  const rowH = 22;
  const top = 20;
  const H = top + Math.max(1, ps.length) * rowH + 26;
  const svg = frame(name, label + ' percentiles', W, H, lines.join(', '), lines);
  svg.append(text(0, 13, label, { class: 'chart-title', 'font-weight': 600 }));
  if (!drawn.length) {
    svg.append(text(W / 2, top + 16, 'no observations in the window', { 'text-anchor': 'middle', class: 'chart-empty' }));
    return setPoints(svg, 0);
  }
  // Domain: every finite positive figure, widened to whole decades.
  const fig = [];
  for (const p of drawn) {
    for (const v of [p.v, p.lo, p.hi]) if (v > 0 && Number.isFinite(v)) fig.push(v);
  }
  let lo = 10 ** Math.floor(Math.log10(Math.min(...fig)));
  let hi = 10 ** Math.ceil(Math.log10(Math.max(...fig)));
  if (hi <= lo) hi = lo * 10;
  const x0 = 34;
  const x1 = W - 172;
  const x = logScale(lo, hi, x0, x1);
  const axisY = top + ps.length * rowH + 4;
  // Grid and ticks.
  for (const t of logTicks(lo, hi)) {
    const tx = x(t);
    svg.append(el('line', { x1: r(tx), x2: r(tx), y1: top - 4, y2: axisY, class: 'chart-grid', stroke: '#ccd', 'stroke-width': 0.5 }));
    svg.append(text(tx, axisY + 13, fmtTick(t), { 'text-anchor': 'middle', class: 'chart-tick', 'font-size': 10, fill: '#555' }));
  }
  svg.append(el('line', { x1: x0, x2: x1, y1: axisY, y2: axisY, class: 'chart-axis', stroke: '#666' }));
  ps.forEach((p, i) => {
    const cy = top + i * rowH + rowH / 2;
    const qn = 'P' + trim(p.q * 100);
    svg.append(text(0, cy + 4, qn, { class: 'chart-label', fill: '#333' }));
    if (!Number.isFinite(p.v)) {
      svg.append(text(x0, cy + 4, 'no observations', { class: 'chart-empty', fill: '#555' }));
      return;
    }
    const bx0 = x(p.lo);
    const bx1 = x(p.hi);
    const band = el('rect', {
      x: r(bx0), y: r(cy - 6), width: r(Math.max(2, bx1 - bx0)), height: 12, rx: 2,
      class: 'chart-range', fill: '#9ab8e8', 'fill-opacity': 0.55,
    });
    band.append(el('title', {}, `${qn} bucket ${fmtSeconds(p.lo)}–${fmtSeconds(p.hi)}`));
    svg.append(band);
    if (p.hi === Infinity) {
      svg.append(el('path', { d: `M${r(x1)} ${r(cy - 6)} l6 6 l-6 6 z`, class: 'chart-open', fill: '#557' }));
    }
    if (!(p.lo > 0)) {
      svg.append(el('path', { d: `M${r(x0)} ${r(cy - 6)} l-6 6 l6 6 z`, class: 'chart-open', fill: '#557' }));
    }
    const dot = el('circle', { cx: r(x(p.v)), cy: r(cy), r: 4.5, class: 'chart-point', fill: '#1a4fa0', stroke: '#fff', 'stroke-width': 1 });
    dot.append(el('title', {}, `${qn} ${fmtSeconds(p.v)}`));
    svg.append(dot);
    svg.append(text(x1 + 10, cy + 4, `${fmtSeconds(p.v)}`, { class: 'chart-value', 'font-weight': 600 }));
    svg.append(text(x1 + 72, cy + 4, `${fmtSeconds(p.lo)}–${fmtSeconds(p.hi)}`, { class: 'chart-bounds', 'font-size': 10, fill: '#555' }));
  });
  return setPoints(svg, drawn.length);
}

/**
 * bucketCounts turns a Distribution's cumulative bucket_counts into the
 * observations of each bucket: [{lo, hi, n}], lo the previous bound (0 for
 * the first). A count lower than the one before (rounding, a reset) reads 0.
 */
export function bucketCounts(dist) {
  const bounds = ((dist && dist.bucketBounds) || []).map(num);
  const cum = ((dist && dist.bucketCounts) || []).map(num);
  const out = [];
  let prevBound = 0;
  let prev = 0;
  for (let i = 0; i < bounds.length && i < cum.length; i++) {
    const c = Number.isFinite(cum[i]) ? cum[i] : prev;
    out.push({ lo: prevBound, hi: bounds[i], n: Math.max(0, c - prev) });
    prev = Math.max(prev, c);
    prevBound = bounds[i];
  }
  return out;
}

/**
 * histogram draws the window's observations per bucket (bucket_counts
 * differenced), one bar per bucket between the first and last non-empty
 * bucket, labelled by bucket upper bound.
 */
export function histogram(name, label, dist) {
  const all = bucketCounts(dist);
  let first = all.findIndex((b) => b.n > 0);
  let last = all.length - 1 - [...all].reverse().findIndex((b) => b.n > 0);
  const bars = first < 0 ? [] : all.slice(first, last + 1);
  const total = bars.reduce((s, b) => s + b.n, 0);
  const lines = bars.map((b) => `${fmtSeconds(b.lo)}–${fmtSeconds(b.hi)}: ${fmtNumber(b.n)}`);
  const W = 420;
  const H = 170;
  const svg = frame(name, label + ' histogram', W, H, `${fmtNumber(total)} observations in ${bars.length} buckets`, lines);
  svg.append(text(0, 13, `${label} · observations per bucket (${fmtNumber(total)})`, { class: 'chart-title', 'font-weight': 600 }));
  if (!bars.length) {
    svg.append(text(W / 2, 80, 'no observations in the window', { 'text-anchor': 'middle', class: 'chart-empty' }));
    return setPoints(svg, 0);
  }
  const x0 = 36;
  const x1 = W - 4;
  const y0 = 24;
  const y1 = H - 34;
  const max = Math.max(...bars.map((b) => b.n));
  const bw = (x1 - x0) / bars.length;
  svg.append(el('line', { x1: x0, x2: x1, y1: y1, y2: y1, class: 'chart-axis', stroke: '#666' }));
  svg.append(text(x0 - 4, y0 + 8, fmtNumber(max), { 'text-anchor': 'end', class: 'chart-tick', 'font-size': 10, fill: '#555' }));
  svg.append(text(x0 - 4, y1, '0', { 'text-anchor': 'end', class: 'chart-tick', 'font-size': 10, fill: '#555' }));
  const every = Math.ceil(bars.length / 8);
  bars.forEach((b, i) => {
    const h = max > 0 ? ((y1 - y0) * b.n) / max : 0;
    const bx = x0 + i * bw;
    const rect = el('rect', {
      x: r(bx + 1), y: r(y1 - h), width: r(Math.max(1, bw - 2)), height: r(h),
      class: 'chart-bar', fill: '#1a4fa0',
    });
    rect.append(el('title', {}, `${fmtSeconds(b.lo)}–${fmtSeconds(b.hi)}: ${fmtNumber(b.n)}`));
    svg.append(rect);
    if (i % every === 0 || i === bars.length - 1) {
      svg.append(text(bx + bw / 2, y1 + 13, '≤' + fmtSeconds(b.hi), {
        'text-anchor': 'middle', class: 'chart-tick', 'font-size': 9, fill: '#555',
      }));
    }
  });
  svg.append(text(x0, H - 4, 'bucket upper bound', { class: 'chart-tick', 'font-size': 10, fill: '#555' }));
  return setPoints(svg, bars.length);
}

/**
 * sparkline draws one series over time: values [{t: ms or index, v}], v
 * non-finite for a gap. fmt formats a value (the fallback text and the
 * aria-label carry the last, lowest and highest values).
 */
export function sparkline(name, label, values, fmt = fmtNumber) {
  const pts = (values || [])
    .map((p, i) => ({ t: p.t === undefined ? i : p.t, v: p.v }))
    .filter((p) => Number.isFinite(p.v) && Number.isFinite(p.t));
  const W = 160;
  const H = 36;
  let summary = 'no data';
  if (pts.length) {
    const vs = pts.map((p) => p.v);
    summary = `last ${fmt(vs[vs.length - 1])}, min ${fmt(Math.min(...vs))}, max ${fmt(Math.max(...vs))}, ${pts.length} points`;
  }
  const svg = frame(name, label, W, H, summary, pts.length ? [summary] : []);
  svg.setAttribute('class', 'chart chart-spark');
  if (!pts.length) {
    svg.append(text(W / 2, H / 2 + 4, 'no data', { 'text-anchor': 'middle', class: 'chart-empty', 'font-size': 11 }));
    return setPoints(svg, 0);
  }
  const ts = pts.map((p) => p.t);
  const vs = pts.map((p) => p.v);
  const tmin = Math.min(...ts);
  const tmax = Math.max(...ts);
  let vmin = Math.min(0, ...vs);
  let vmax = Math.max(...vs);
  if (vmax === vmin) vmax = vmin + 1;
  const px = (t) => (tmax === tmin ? W / 2 : 3 + ((t - tmin) / (tmax - tmin)) * (W - 6));
  const py = (v) => H - 3 - ((v - vmin) / (vmax - vmin)) * (H - 6);
  const d = pts.map((p, i) => `${i ? 'L' : 'M'}${r(px(p.t))} ${r(py(p.v))}`).join(' ');
  svg.append(el('path', {
    d: `${d} L${r(px(tmax))} ${H - 3} L${r(px(tmin))} ${H - 3} Z`,
    class: 'chart-area', fill: '#9ab8e8', 'fill-opacity': 0.35, stroke: 'none',
  }));
  svg.append(el('path', { d, class: 'chart-line', fill: 'none', stroke: '#1a4fa0', 'stroke-width': 1.5 }));
  const lastP = pts[pts.length - 1];
  svg.append(el('circle', { cx: r(px(lastP.t)), cy: r(py(lastP.v)), r: 2.5, class: 'chart-point', fill: '#1a4fa0' }));
  return setPoints(svg, pts.length);
}

/**
 * rangeBars draws a horizontal bar per subject from 0 to its value, with
 * the value's bucket drawn as a range over the bar. rows: [{label, value,
 * lo, hi, rank, approx, outlier, note}]; rank 0 or a non-finite value draws
 * no bar and shows the note. approx marks a value within bucket resolution
 * of the median (≈); outlier marks a markedly slower subject (!).
 */
export function rangeBars(name, label, rows, fmt = fmtSeconds, { heading = true } = {}) {
  const W = 460;
  const rowH = 24;
  const top = 22;
  const H = top + Math.max(1, rows.length) * rowH + 24;
  const drawn = rows.filter((x) => Number.isFinite(x.value) && x.rank > 0);
  const lines = rows.map((x) =>
    drawn.includes(x)
      ? `#${x.rank} ${x.label} ${fmt(x.value)} (bucket ${fmt(x.lo)}–${fmt(x.hi)})${x.approx ? ' ≈ within resolution' : ''}${x.outlier ? ' outlier' : ''}`
      : `${x.label}: ${x.note || 'no value'}`);
  const svg = frame(name, label, W, H, lines.join(', '), lines);
  if (heading) svg.append(text(0, 13, label, { class: 'chart-title', 'font-weight': 600 }));
  if (!drawn.length) {
    svg.append(text(W / 2, top + 16, 'no values', { 'text-anchor': 'middle', class: 'chart-empty' }));
    return setPoints(svg, 0);
  }
  const x0 = 130;
  const x1 = W - 70;
  // The axis runs to the largest value with room; a bucket bound beyond
  // that (or +Inf) is drawn open at the edge. Values spread over more than
  // 20× get a logarithmic axis, so the fast subjects' bars stay readable.
  const vs = drawn.map((x) => x.value);
  const vmax = Math.max(...vs);
  const vmin = Math.min(...vs.filter((v) => v > 0), vmax);
  const finHi = drawn.map((x) => x.hi).filter((v) => Number.isFinite(v));
  const log = vmin > 0 && vmax / vmin > 20;
  let x;
  let ticks;
  let amax;
  if (log) {
    const lows = drawn.map((x) => x.lo).filter((v) => v > 0);
    const lo = 10 ** Math.floor(Math.log10(Math.min(vmin, ...lows)));
    amax = 10 ** Math.ceil(Math.log10(Math.max(vmax, ...finHi.filter((v) => v <= vmax * 2))));
    x = logScale(lo, amax, x0, x1);
    ticks = logTicks(lo, amax);
  } else {
    const want = Math.min(Math.max(vmax, ...finHi), vmax * 2) || 1;
    const step = nice125(want / 4);
    amax = step * Math.ceil(want / step - 1e-9);
    x = (v) => x0 + (Math.min(Math.max(v, 0), amax) / amax) * (x1 - x0);
    ticks = [];
    for (let t = 0; t <= amax + step / 2; t += step) ticks.push(t);
  }
  svg.setAttribute('data-scale', log ? 'log' : 'linear');
  const axisY = top + rows.length * rowH + 2;
  for (const t of ticks) {
    svg.append(el('line', { x1: r(x(t)), x2: r(x(t)), y1: top - 2, y2: axisY, class: 'chart-grid', stroke: '#ccd', 'stroke-width': 0.5 }));
    svg.append(text(x(t), axisY + 13, fmt(t), { 'text-anchor': 'middle', class: 'chart-tick', 'font-size': 10, fill: '#555' }));
  }
  if (log) svg.append(text(x1, 13, 'log scale', { 'text-anchor': 'end', class: 'chart-tick', 'font-size': 10, fill: '#555' }));
  rows.forEach((row, i) => {
    const cy = top + i * rowH + rowH / 2;
    const name = row.label.length > 20 ? row.label.slice(0, 19) + '…' : row.label;
    const lab = text(0, cy + 4, (row.rank > 0 ? `#${row.rank} ` : '') + name, { class: 'chart-label', fill: '#333' });
    lab.append(el('title', {}, row.label));
    svg.append(lab);
    if (!drawn.includes(row)) {
      svg.append(text(x0, cy + 4, row.note || 'no value', { class: 'chart-empty', fill: '#555', 'font-size': 11 }));
      return;
    }
    const bar = el('rect', {
      x: x0, y: r(cy - 7), width: r(Math.max(1, x(row.value) - x0)), height: 14,
      class: 'chart-bar' + (row.outlier ? ' chart-outlier' : ''), fill: row.outlier ? '#b3261e' : '#1a4fa0',
    });
    bar.append(el('title', {}, lines[i]));
    svg.append(bar);
    const rx0 = x(row.lo);
    const rx1 = x(row.hi);
    svg.append(el('path', {
      d: `M${r(rx0)} ${r(cy - 4)} v8 M${r(rx0)} ${r(cy)} H${r(rx1)} M${r(rx1)} ${r(cy - 4)} v8`,
      class: 'chart-whisker', stroke: '#111', 'stroke-width': 1.5, fill: 'none',
    }));
    if (row.hi > amax) {
      svg.append(el('path', { d: `M${r(x1)} ${r(cy - 5)} l6 5 l-6 5 z`, class: 'chart-open', fill: '#111' }));
    }
    const marks = (row.approx ? ' ≈' : '') + (row.outlier ? ' !' : '');
    svg.append(text(x1 + 8, cy + 4, fmt(row.value) + marks, { class: 'chart-value', 'font-weight': 600 }));
  });
  return setPoints(svg, drawn.length);
}

// nice125 rounds v up to 1, 2 or 5 times a power of ten.
function nice125(v) {
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 5, 10]) if (m * p >= v * (1 - 1e-9)) return m * p;
  return 10 * p;
}
