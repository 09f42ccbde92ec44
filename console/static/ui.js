// ui.js: small DOM and wording helpers the pages share.

// el builds an element: el('a', {href: '#/', class: 'x', dataset: {node: 'a'}}, 'text', child…).
// Attributes are set as attributes (never style=: the CSP forbids inline
// styles in markup; set element.style from code instead).
export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k === 'class') e.className = v;
      else if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : String(c));
  }
  return e;
}

// STATUSES are the statuses in order of concern, each with its CSS class
// (app.css colours it and draws its glyph), short label and meaning.
export const STATUSES = [
  {name: 'STATUS_CRIT', cls: 's-crit', label: 'CRIT', word: 'critical: users are hurt now'},
  {name: 'STATUS_DOWN', cls: 's-down', label: 'DOWN', word: 'down: its metrics endpoint does not answer'},
  {name: 'STATUS_WARN', cls: 's-warn', label: 'WARN', word: 'warning: worth a look, still takes traffic'},
  {name: 'STATUS_UNKNOWN', cls: 's-unknown', label: 'UNKNOWN', word: 'unknown: no fresh data'},
  {name: 'STATUS_OK', cls: 's-ok', label: 'OK', word: 'within normal bounds'},
];
const byName = new Map(STATUSES.map(s => [s.name, s]));

// statusInfo describes a Status enum name; an unset or unknown one reads
// UNKNOWN (never healthy).
export function statusInfo(name) {
  return byName.get(name) || byName.get('STATUS_UNKNOWN');
}

// statusBadge is the status as a label with glyph and colour.
export function statusBadge(name) {
  const s = statusInfo(name);
  return el('span', {class: 'status ' + s.cls, title: s.word}, s.label);
}

// causeText turns CAUSE_DECODE_BOUND into "Decode bound"; unset is "".
export function causeText(name) {
  if (!name || name === 'CAUSE_UNSPECIFIED') return '';
  const t = name.replace(/^CAUSE_/, '').toLowerCase().replace(/_/g, ' ');
  return t.charAt(0).toUpperCase() + t.slice(1);
}

// engineText turns ENGINE_VLLM into "vllm".
export function engineText(name) {
  return !name || name === 'ENGINE_UNSPECIFIED' ? '' : name.replace(/^ENGINE_/, '').toLowerCase();
}

// clock is a time as HH:MM:SS in the reader's locale.
export function clock(d) {
  return d.toLocaleTimeString([], {hour: '2-digit', minute: '2-digit', second: '2-digit'});
}
