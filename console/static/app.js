// app.js: the console's shell. It routes the location hash to a page
// module, runs one page at a time, keeps the header (navigation, connection
// state) and the token form.
//
// Routes: #/ fleet, #/node/<id> one node, #/compare the comparison; a query
// after "?" (#/?model=x&status=STATUS_CRIT) is the page's own state.
// Each page is pages/<name>.js exporting render(root, params, ctx), which
// fills root and returns a cleanup function called when the page is left.
//   params: {id (node pages), query: URLSearchParams of the hash's query}
//   ctx:    {api (api.js), nav, signal (aborted when the page is left)}
//   nav:    go(path, query?)        navigate (adds a history entry)
//           href(path, query?)      the "#/…" link for a path and query
//           setQuery(query)         replace the current query without
//                                   re-rendering (filters kept in the URL)

import * as api from './api.js';

const pages = {
  fleet: () => import('./pages/fleet.js'),
  node: () => import('./pages/node.js'),
  compare: () => import('./pages/compare.js'),
};

const main = document.getElementById('main');
const conn = document.getElementById('conn');
const form = document.getElementById('token-form');
const tokenInput = document.getElementById('token-input');
const tokenButton = document.getElementById('token-button');
const tokenWhy = document.getElementById('token-why');

// route parses a hash into a page name and its params.
export function route(hash) {
  const h = (hash || '').replace(/^#/, '');
  const i = h.indexOf('?');
  const path = i < 0 ? h : h.slice(0, i);
  const query = new URLSearchParams(i < 0 ? '' : h.slice(i + 1));
  const parts = path.split('/').filter(Boolean);
  let segs;
  try { segs = parts.map(decodeURIComponent); } catch { segs = parts; }
  if (segs.length === 0) return {page: 'fleet', path: '/', params: {query}};
  if (segs[0] === 'node' && segs.length === 2) return {page: 'node', path, params: {id: segs[1], query}};
  if (segs[0] === 'compare' && segs.length === 1) return {page: 'compare', path, params: {query}};
  return {page: null, path, params: {query}};
}

function href(path, query) {
  const p = path.startsWith('/') ? path : '/' + path;
  const q = query ? new URLSearchParams(query).toString() : '';
  return '#' + p + (q ? '?' + q : '');
}

let current = null; // {cleanup, abort, path}

const nav = {
  href,
  go(path, query) { location.hash = href(path, query); },
  setQuery(query) {
    const path = current ? current.path : '/';
    history.replaceState(null, '', href(path, query));
  },
};

function leave() {
  if (!current) return;
  const c = current;
  current = null;
  c.abort.abort();
  try { if (typeof c.cleanup === 'function') c.cleanup(); } catch (e) { console.error('page cleanup', e); }
  api.announce(null);
}

let generation = 0;

async function show() {
  const gen = ++generation;
  leave();
  const r = route(location.hash);
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === (r.page === 'node' ? 'fleet' : r.page)) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  main.replaceChildren();
  if (!r.page) {
    const h = el('h1', 'Not found');
    const p = el('p', 'No page at ' + r.path + '. ');
    const a = el('a', 'Go to the fleet');
    a.href = '#/';
    p.append(a);
    main.append(h, p);
    document.title = 'Not found · llmdiag';
    return;
  }
  let mod;
  try {
    mod = await pages[r.page]();
  } catch (e) {
    if (gen !== generation) return;
    main.append(el('h1', 'The page did not load'), el('p', String(e)));
    return;
  }
  if (gen !== generation) return; // the hash moved on meanwhile
  const abort = new AbortController();
  current = {path: r.path, abort, cleanup: null};
  main.dataset.page = r.page;
  try {
    current.cleanup = mod.render(main, r.params, {api, nav, signal: abort.signal});
  } catch (e) {
    console.error(e);
    main.append(el('p', 'The page failed: ' + e.message));
  }
}

function el(tag, text) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  return e;
}

// The token form: shown when a call answers Unauthenticated, or from the
// header's Token button.
function openForm(why) {
  form.hidden = false;
  tokenButton.setAttribute('aria-expanded', 'true');
  if (why) tokenWhy.textContent = why;
  tokenInput.focus();
}

function closeForm() {
  form.hidden = true;
  tokenButton.setAttribute('aria-expanded', 'false');
}

form.addEventListener('submit', e => {
  e.preventDefault();
  const t = tokenInput.value.trim();
  if (!t) return;
  api.setToken(t);
  tokenInput.value = '';
  closeForm();
  show();
});

document.getElementById('token-forget').addEventListener('click', () => {
  api.setToken('');
  tokenInput.value = '';
  tokenWhy.textContent = 'Token forgotten. Enter one to read the fleet if this llmdiag asks for it.';
  show();
});

tokenButton.addEventListener('click', () => {
  if (form.hidden) openForm(api.getToken() ? 'A token is set for this tab. Enter another to replace it.' : '');
  else closeForm();
});

api.events.addEventListener('auth', e => {
  const had = api.getToken();
  openForm(had
    ? 'The server did not accept the token (' + e.detail.message + '). Enter another.'
    : 'This llmdiag asks for a token (it is kept in this tab only and sent as a bearer token to this server).');
});

api.events.addEventListener('connection', e => {
  conn.dataset.state = e.detail.state;
  conn.textContent = e.detail.text;
});

document.getElementById('skip').addEventListener('click', e => {
  e.preventDefault(); // #main is not a route
  main.focus();
});

window.addEventListener('hashchange', show);
show();
