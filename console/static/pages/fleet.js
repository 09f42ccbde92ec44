// The fleet page (#/): every node as a tile, grouped by model, coloured by
// status (with its label and glyph), with root cause, routability and load
// score; a tile links to the node's page. Filters by model, status and
// fleet-file label live in the hash's query (#/?model=glm-4.6&status=crit&label=team%3Dinfra).
//
// Data: ListNodes for the full rows, then StreamHealth keeps status, cause,
// routability and load score live without a reload (INITIAL and CHANGE
// events; SYNCED once the current state is in; HEARTBEATs while nothing
// changes). A broken stream shows a banner saying since when the page is
// stale, and api.stream reconnects and resumes. A token whose role may not
// follow the stream (PermissionDenied: auth/policy.go gives StreamHealth to
// the router and admin roles) falls back to polling ListNodes every
// POLL_MS, and the page says so.
import {el, STATUSES, statusInfo, statusBadge, causeText, engineText, clock} from '../ui.js';

const POLL_MS = 5000;
const HEARTBEAT = '10s';
const STALL_MS = 25000; // no message, not even a heartbeat, for this long: reconnect
const MAX_PAGES = 20; // ListNodes pages of up to 1000 nodes

export function render(root, params, ctx) {
  const {api, nav, signal} = ctx;
  const nodes = new Map(); // id → {id, model, engine, status, rootCause, routable, loadScore, labels}
  const tiles = new Map(); // id → tile <a>
  const filters = {
    model: params.query.get('model') || '',
    status: params.query.get('status') || '',
    label: params.query.get('label') || '',
  };
  let pollTimer = 0;
  let frame = 0;
  let rebuild = true;
  let updatedAt = null;

  const title = el('h1', null, 'Fleet');
  const banners = el('div', {id: 'fleet-banners', 'aria-live': 'polite'});
  const summary = el('ul', {class: 'summary', id: 'fleet-summary', 'aria-label': 'Nodes by status'});
  const modelSel = el('select', {id: 'f-model'});
  const statusSel = el('select', {id: 'f-status'});
  const labelSel = el('select', {id: 'f-label'});
  const updated = el('p', {class: 'muted', id: 'fleet-updated'});
  const list = el('div', {id: 'fleet', 'aria-busy': 'true'});
  const filterBar = el('form', {class: 'filters', role: 'search', 'aria-label': 'Filter nodes'},
    el('label', {for: 'f-model'}, 'Model', modelSel),
    el('label', {for: 'f-status'}, 'Status', statusSel),
    el('label', {for: 'f-label'}, 'Label', labelSel),
  );
  filterBar.addEventListener('submit', e => e.preventDefault());
  root.append(title, banners, summary, filterBar, updated, list);
  document.title = 'Fleet · llmdiag';
  list.append(el('p', {class: 'muted'}, 'Loading the fleet…'));

  for (const [sel, key] of [[modelSel, 'model'], [statusSel, 'status'], [labelSel, 'label']]) {
    sel.addEventListener('change', () => {
      filters[key] = sel.value;
      const q = {};
      for (const [k, v] of Object.entries(filters)) if (v) q[k] = v;
      nav.setQuery(q);
      rebuild = true;
      schedule();
    });
  }

  // Banners, by kind: one of each at a time.
  const shown = new Map();
  function banner(kind, cls, text) {
    const old = shown.get(kind);
    if (!text) {
      if (old) { old.remove(); shown.delete(kind); }
      return;
    }
    if (old && old.textContent === text && old.className === 'banner ' + cls) return;
    const b = el('p', {class: 'banner ' + cls, dataset: {banner: kind}, role: cls === 'info' ? null : 'alert'}, text);
    if (old) old.replaceWith(b); else banners.append(b);
    shown.set(kind, b);
  }

  function setNode(n) {
    const prev = nodes.get(n.id);
    nodes.set(n.id, Object.assign(prev || {}, n));
    if (!prev) rebuild = true;
  }

  function fromNode(n) {
    return {
      id: n.id, model: n.model || '', engine: n.engine || '',
      status: n.status || 'STATUS_UNKNOWN', rootCause: n.rootCause || '',
      routable: !!n.routable, loadScore: n.loadScore || 0, labels: n.labels || {},
    };
  }

  function onHealth(h) {
    if (!h || !h.node) return;
    if (h.removed) {
      if (nodes.delete(h.node)) rebuild = true;
      return;
    }
    const n = {
      id: h.node, status: h.status || 'STATUS_UNKNOWN', rootCause: h.rootCause || '',
      routable: !!h.routable, loadScore: h.loadScore || 0,
    };
    if (h.model) n.model = h.model;
    if (h.labels) n.labels = h.labels;
    if (!nodes.has(h.node)) Object.assign(n, {model: h.model || '', engine: '', labels: h.labels || {}});
    setNode(n);
  }

  function touch() {
    updatedAt = new Date();
    schedule();
  }

  function schedule() {
    if (!frame && !signal.aborted) frame = requestAnimationFrame(draw);
  }

  function passes(n) {
    if (filters.model && n.model !== filters.model) return false;
    if (filters.status && statusInfo(n.status).label.toLowerCase() !== filters.status) return false;
    if (filters.label) {
      const i = filters.label.indexOf('=');
      const k = i < 0 ? filters.label : filters.label.slice(0, i);
      const v = i < 0 ? '' : filters.label.slice(i + 1);
      if (!(k in (n.labels || {})) || (i >= 0 && n.labels[k] !== v)) return false;
    }
    return true;
  }

  function options(sel, all, values, current) {
    const want = [['', all], ...values];
    if (current && !values.some(([v]) => v === current)) want.push([current, current + ' (none now)']);
    const same = sel.options.length === want.length && want.every(([v, t], i) => sel.options[i].value === v && sel.options[i].textContent === t);
    if (!same) sel.replaceChildren(...want.map(([v, t]) => el('option', {value: v}, t)));
    sel.value = current;
  }

  function fillFilters() {
    const models = [...new Set([...nodes.values()].map(n => n.model))].sort();
    options(modelSel, 'All models', models.map(m => [m, m || '(no model)']), filters.model);
    options(statusSel, 'All statuses', STATUSES.map(s => [s.label.toLowerCase(), s.label]), filters.status);
    const labels = new Set();
    for (const n of nodes.values()) for (const [k, v] of Object.entries(n.labels || {})) labels.add(k + '=' + v);
    options(labelSel, 'All labels', [...labels].sort().map(l => [l, l]), filters.label);
    labelSel.disabled = labels.size === 0 && !filters.label;
  }

  function fillSummary() {
    const counts = new Map();
    for (const n of nodes.values()) {
      const s = statusInfo(n.status).name;
      counts.set(s, (counts.get(s) || 0) + 1);
    }
    const items = [];
    for (const s of STATUSES) {
      const c = counts.get(s.name);
      if (c) items.push(el('li', null, el('span', {class: 'status ' + s.cls, title: s.word}, c + ' ' + s.label)));
    }
    summary.replaceChildren(...items);
    title.textContent = 'Fleet · ' + nodes.size + (nodes.size === 1 ? ' node' : ' nodes');
  }

  function updateTile(a, n) {
    const s = statusInfo(n.status);
    const was = a.dataset.status;
    a.className = 'tile ' + s.cls;
    a.dataset.status = s.name;
    a.dataset.routable = n.routable ? 'true' : 'false';
    const cause = causeText(n.rootCause);
    a.querySelector('.status').replaceWith(statusBadge(n.status));
    a.querySelector('.tile-cause').textContent = cause || 'No cause named';
    a.querySelector('.v-routable').textContent = n.routable ? 'yes' : 'no';
    a.querySelector('.v-load').textContent = n.loadScore.toFixed(2);
    const bar = a.querySelector('.loadbar > span');
    bar.style.width = Math.min(100, Math.max(0, n.loadScore * 100)).toFixed(0) + '%';
    a.setAttribute('aria-label', n.id + ': ' + s.label + (cause ? ', ' + cause : '') +
      ', ' + (n.routable ? 'routable' : 'not routable') + ', load ' + n.loadScore.toFixed(2));
    if (was && was !== s.name) {
      a.classList.remove('flash');
      void a.offsetWidth; // restart the animation
      a.classList.add('flash');
    }
  }

  function newTile(n) {
    const labels = Object.entries(n.labels || {}).map(([k, v]) => k + '=' + v).join(' · ');
    const a = el('a', {class: 'tile', href: nav.href('/node/' + encodeURIComponent(n.id)), dataset: {node: n.id}},
      el('div', {class: 'tile-head'}, el('span', {class: 'tile-id'}, n.id), el('span', {class: 'status'})),
      el('p', {class: 'tile-cause'}),
      el('dl', {class: 'tile-meta'},
        el('div', null, el('dt', null, 'routable'), el('dd', {class: 'v-routable'})),
        el('div', null, el('dt', null, 'load'), el('dd', {class: 'v-load'})),
        engineText(n.engine) ? el('div', null, el('dt', null, 'engine'), el('dd', null, engineText(n.engine))) : null),
      el('div', {class: 'loadbar', 'aria-hidden': 'true'}, el('span')),
      labels ? el('p', {class: 'tile-labels'}, labels) : null);
    updateTile(a, n);
    return a;
  }

  function draw() {
    frame = 0;
    if (signal.aborted) return;
    fillSummary();
    fillFilters();
    updated.textContent = updatedAt ? 'Updated ' + clock(updatedAt) : '';
    if (!rebuild) {
      for (const [id, a] of tiles) {
        const n = nodes.get(id);
        if (n) updateTile(a, n);
      }
      return;
    }
    rebuild = false;
    list.removeAttribute('aria-busy');
    const visible = [...nodes.values()].filter(passes);
    const groups = new Map();
    for (const n of visible) {
      if (!groups.has(n.model)) groups.set(n.model, []);
      groups.get(n.model).push(n);
    }
    const sections = [];
    for (const model of [...groups.keys()].sort()) {
      const ns = groups.get(model).sort((a, b) => a.id.localeCompare(b.id, undefined, {numeric: true}));
      const bad = ns.filter(n => n.status === 'STATUS_CRIT' || n.status === 'STATUS_DOWN').length;
      const items = ns.map(n => {
        let a = tiles.get(n.id);
        if (a) updateTile(a, n); else { a = newTile(n); tiles.set(n.id, a); }
        return el('li', null, a);
      });
      const hid = 'g-' + (model || '-').replace(/[^A-Za-z0-9_-]/g, '_');
      sections.push(el('section', {class: 'group', 'aria-labelledby': hid, dataset: {model}},
        el('h2', {id: hid}, model || '(no model)',
          el('span', {class: 'muted'}, ns.length + (ns.length === 1 ? ' node' : ' nodes') + (bad ? ', ' + bad + ' critical or down' : ''))),
        el('ul', {class: 'tiles'}, items)));
    }
    for (const id of tiles.keys()) if (!nodes.has(id)) tiles.delete(id);
    if (sections.length === 0) {
      const msg = nodes.size === 0 ? 'No nodes yet: the service has not listed any (it lists them after its first refresh).' : 'No node matches these filters. ';
      const p = el('p', {class: 'muted', id: 'fleet-empty'}, msg);
      if (nodes.size > 0) {
        p.append(el('button', {type: 'button', class: 'secondary', onclick: () => {
          filters.model = filters.status = filters.label = '';
          nav.setQuery({});
          rebuild = true;
          schedule();
        }}, 'Show all'));
      }
      sections.push(p);
    }
    list.replaceChildren(...sections);
  }

  // listAll reads every page of ListNodes.
  async function listAll() {
    const all = [];
    let token = '';
    let degraded = null;
    for (let i = 0; i < MAX_PAGES; i++) {
      const res = await api.unary('ListNodes', token ? {pageSize: 1000, pageToken: token} : {pageSize: 1000}, {signal});
      all.push(...(res.nodes || []));
      degraded = degraded || res.degraded;
      token = res.nextPageToken || '';
      if (!token) break;
    }
    return {all, degraded, truncated: !!token};
  }

  function applyList({all, degraded, truncated}) {
    const seen = new Set();
    for (const n of all) { setNode(fromNode(n)); seen.add(n.id); }
    for (const id of nodes.keys()) if (!seen.has(id)) { nodes.delete(id); rebuild = true; }
    banner('degraded', 'info', degraded ? 'Answered from this replica\'s copy of the shared state' + (degraded.reason ? ' (' + degraded.reason + ')' : '') + '.' : '');
    banner('truncated', 'info', truncated ? 'Only the first ' + MAX_PAGES * 1000 + ' nodes are shown.' : '');
    touch();
  }

  function describe(err) {
    return err.code === 'network' ? 'the server cannot be reached' : err.code + (err.message && err.message !== err.code ? ': ' + err.message : '');
  }

  // poll reads ListNodes every POLL_MS: the fallback when the stream is not
  // allowed, and the retry while the first read fails.
  async function poll(why) {
    if (signal.aborted) return;
    try {
      applyList(await listAll());
      banner('stale', '', '');
      if (why) api.announce('polling', 'polling every ' + POLL_MS / 1000 + ' s');
    } catch (err) {
      if (signal.aborted) return;
      api.announce('offline', 'no connection');
      banner('stale', 'warn', 'Could not read the fleet (' + describe(err) + ')' +
        (updatedAt ? '; the tiles show the state as of ' + clock(updatedAt) : '') + '. Retrying every ' + POLL_MS / 1000 + ' s.');
      if (err.code === 'unauthenticated') showNeedToken();
    }
    pollTimer = setTimeout(() => poll(why), POLL_MS);
  }

  function showNeedToken() {
    if (nodes.size === 0) list.replaceChildren(el('p', {id: 'fleet-need-token'}, 'This llmdiag needs a token to show the fleet: enter it above.'));
  }

  async function live() {
    let synced = false;
    api.announce('connecting', 'connecting…');
    try {
      await api.stream('StreamHealth', {heartbeatInterval: HEARTBEAT}, msg => {
        switch (msg.kind) {
          case 'EVENT_KIND_INITIAL':
          case 'EVENT_KIND_CHANGE':
            onHealth(msg.health);
            break;
          case 'EVENT_KIND_SYNCED':
            synced = true;
            break;
        }
        if (synced) {
          banner('stale', '', '');
          api.announce('live', 'live');
        }
        touch();
      }, {
        signal,
        stallMs: STALL_MS,
        onState: s => {
          if (s.state !== 'reconnecting') return;
          synced = false;
          api.announce('reconnecting', 'reconnecting…');
          banner('stale', 'warn', 'Live updates stopped (' + describe(s.error) + ')' +
            (updatedAt ? '; the tiles show the state as of ' + clock(updatedAt) : '') +
            '. Reconnecting in ' + Math.max(1, Math.round(s.delayMs / 1000)) + ' s.');
          list.dataset.stale = 'true';
        },
      });
    } catch (err) {
      if (signal.aborted) return;
      if (err.code === 'unauthenticated') {
        showNeedToken();
        return;
      }
      const why = err.code === 'permission_denied'
        ? 'This token may read the fleet but not follow its live health stream (StreamHealth is for the router and admin roles), so the page reads it every ' + POLL_MS / 1000 + ' s instead.'
        : 'The live health stream is not available (' + describe(err) + '), so the page reads the fleet every ' + POLL_MS / 1000 + ' s instead.';
      banner('mode', 'info', why);
      pollTimer = setTimeout(() => poll(true), POLL_MS);
    }
  }

  // Observe the stale marker: a synced stream or a good poll clears it.
  const clearStale = new MutationObserver(() => {
    if (!shown.has('stale')) delete list.dataset.stale;
  });
  clearStale.observe(banners, {childList: true});

  (async () => {
    try {
      applyList(await listAll());
    } catch (err) {
      if (signal.aborted) return;
      if (err.code === 'unauthenticated') { showNeedToken(); return; }
      banner('stale', 'warn', 'Could not read the fleet (' + describe(err) + '). Retrying every ' + POLL_MS / 1000 + ' s.');
      // Poll until the first read succeeds, then go live.
      await new Promise(resolve => {
        const retry = async () => {
          if (signal.aborted) return resolve();
          try { applyList(await listAll()); banner('stale', '', ''); resolve(); } catch (e) {
            if (e.code === 'unauthenticated') { showNeedToken(); return; } // the token form re-renders
            pollTimer = setTimeout(retry, POLL_MS);
          }
        };
        pollTimer = setTimeout(retry, POLL_MS);
      });
      if (signal.aborted) return;
    }
    live();
  })();

  return () => {
    clearTimeout(pollTimer);
    cancelAnimationFrame(frame);
    clearStale.disconnect();
  };
}
