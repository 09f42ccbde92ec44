// api.js: the console's only way to the service. It calls
// llmdiag.v1.DiagnosisService with the Connect protocol from this origin:
//   unary(method, request)   a read, as an HTTP GET with the request as JSON
//                            in the query (the procedures are marked
//                            NO_SIDE_EFFECTS in proto/llmdiag/v1/diagnosis.proto);
//   stream(method, request, onMessage, {signal})
//                            a server stream (StreamHealth) over fetch, in
//                            Connect's enveloped JSON frames, reconnecting
//                            with backoff and resuming after the last
//                            resume_token it saw.
// Messages are protojson: lowerCamelCase fields, enums by name, fields at
// their zero value left out (a missing routable is false, a missing
// loadScore 0).
//
// The bearer token is kept in sessionStorage ("llmdiag.token": this tab
// only, gone when it closes) and sent as Authorization: Bearer. An
// Unauthenticated answer fires "auth" on events; app.js then shows the
// token form. "connection" on events carries what the header shows.

const SERVICE = '/llmdiag.v1.DiagnosisService/';
const TOKEN_KEY = 'llmdiag.token';
// MAX_FRAME bounds one stream message (a NodeHealth is well under 4 KiB).
const MAX_FRAME = 1 << 20;
// Codes a retry cannot fix: the stream gives up and rejects with them.
const PERMANENT = new Set(['unauthenticated', 'permission_denied', 'invalid_argument', 'unimplemented', 'not_found', 'failed_precondition', 'out_of_range']);

export const events = new EventTarget();

// ConnectError is a failed call: code is Connect's code string
// ("unauthenticated", "unavailable", …), message the server's.
export class ConnectError extends Error {
  constructor(code, message) {
    super(message || code);
    this.name = 'ConnectError';
    this.code = code;
  }
}

export function getToken() {
  try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
}

export function setToken(token) {
  try {
    if (token) sessionStorage.setItem(TOKEN_KEY, token);
    else sessionStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lasts for this page only */ memoryToken = token; }
}
let memoryToken = '';

function headers(extra) {
  const h = Object.assign({}, extra);
  const t = getToken() || memoryToken;
  if (t) h.Authorization = 'Bearer ' + t;
  return h;
}

// The header's connection state: the live stream's or polling's when a page
// holds one (announce), else the last unary call's.
let unaryState = {state: 'idle', text: 'starting…'};
let liveState = null;
function emit() {
  events.dispatchEvent(new CustomEvent('connection', {detail: liveState || unaryState}));
}

// announce sets the connection state the header shows while a page keeps
// data live (state: "live", "connecting", "reconnecting", "polling",
// "offline"); null gives the header back to the unary calls.
export function announce(state, text) {
  liveState = state ? {state, text: text || state} : null;
  emit();
}

function setUnary(state, text) {
  unaryState = {state, text};
  if (!liveState) emit();
}

function fail(err) {
  if (err.code === 'unauthenticated') {
    setUnary('auth', 'token needed');
    events.dispatchEvent(new CustomEvent('auth', {detail: {message: err.message}}));
  } else if (err.code === 'unavailable' || err.code === 'network') {
    setUnary('offline', 'no connection');
  }
  return err;
}

// codeOfStatus maps an HTTP status to a Connect code when the body has none
// (Connect's table).
function codeOfStatus(status) {
  switch (status) {
    case 400: return 'internal';
    case 401: return 'unauthenticated';
    case 403: return 'permission_denied';
    case 404: return 'unimplemented';
    case 429: case 502: case 503: case 504: return 'unavailable';
    default: return 'unknown';
  }
}

async function httpError(res) {
  let body = null;
  try { body = await res.json(); } catch { /* not JSON */ }
  if (body && typeof body.code === 'string') return new ConnectError(body.code, body.message || '');
  return new ConnectError(codeOfStatus(res.status), 'HTTP ' + res.status);
}

function toConnectError(err) {
  if (err instanceof ConnectError) return err;
  if (err && err.name === 'AbortError') return new ConnectError('canceled', 'canceled');
  // fetch rejects with a TypeError when the server cannot be reached.
  return new ConnectError('network', (err && err.message) || 'network error');
}

// unary calls DiagnosisService/<method> with request (protojson) and
// resolves to its response, or rejects with a ConnectError.
export async function unary(method, request = {}, {signal} = {}) {
  const q = new URLSearchParams({connect: 'v1', encoding: 'json', message: JSON.stringify(request)});
  let res;
  try {
    res = await fetch(SERVICE + method + '?' + q, {headers: headers(), signal, cache: 'no-store'});
  } catch (err) {
    throw fail(toConnectError(err));
  }
  if (!res.ok) throw fail(await httpError(res));
  const body = await res.json();
  setUnary('ok', 'connected');
  return body;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

function envelope(msg) {
  const payload = enc.encode(JSON.stringify(msg));
  const out = new Uint8Array(5 + payload.length);
  new DataView(out.buffer).setUint32(1, payload.length);
  out.set(payload, 5);
  return out;
}

function sleep(ms, signal) {
  return new Promise(resolve => {
    const t = setTimeout(done, ms);
    function done() { clearTimeout(t); signal && signal.removeEventListener('abort', done); resolve(); }
    signal && signal.addEventListener('abort', done);
  });
}

// stream calls the server-streaming DiagnosisService/<method> and passes
// each message to onMessage until signal aborts. A broken stream (network,
// server restart, no message for stallMs) is reopened after a backoff (from
// 0.5 s doubling to maxBackoffMs, with jitter; reset by a message), with
// resumeToken set to the last resume token received, so nothing is missed.
// onState({state, attempt, delayMs, error}) reports "connecting", "open"
// (a message arrived), "reconnecting". It resolves when signal aborts and
// rejects with a ConnectError a retry cannot fix (unauthenticated,
// permission_denied, invalid_argument, …).
export function stream(method, request, onMessage, {signal, onState, stallMs = 35000, maxBackoffMs = 10000} = {}) {
  const state = s => { try { onState && onState(s); } catch (e) { console.error(e); } };
  return (async () => {
    let resume = request.resumeToken || '';
    let attempt = 0;
    while (!(signal && signal.aborted)) {
      const ctl = new AbortController();
      const stop = () => ctl.abort();
      signal && signal.addEventListener('abort', stop);
      let watchdog = 0;
      let stalled = false;
      const arm = () => {
        clearTimeout(watchdog);
        watchdog = setTimeout(() => { stalled = true; ctl.abort(); }, stallMs);
      };
      try {
        state({state: 'connecting', attempt});
        arm();
        const body = Object.assign({}, request);
        if (resume) body.resumeToken = resume;
        let res;
        try {
          res = await fetch(SERVICE + method, {
            method: 'POST',
            headers: headers({'Content-Type': 'application/connect+json', 'Connect-Protocol-Version': '1'}),
            body: envelope(body),
            signal: ctl.signal,
            cache: 'no-store',
          });
        } catch (err) {
          throw toConnectError(err);
        }
        if (!res.ok) throw await httpError(res);
        const reader = res.body.getReader();
        let buf = new Uint8Array(0);
        let opened = false;
        for (;;) {
          let chunk;
          try {
            chunk = await reader.read();
          } catch (err) {
            throw stalled ? new ConnectError('unavailable', 'no message for ' + stallMs / 1000 + ' s') : toConnectError(err);
          }
          if (chunk.done) throw new ConnectError('unavailable', 'the stream ended');
          arm();
          const next = new Uint8Array(buf.length + chunk.value.length);
          next.set(buf);
          next.set(chunk.value, buf.length);
          buf = next;
          while (buf.length >= 5) {
            const flags = buf[0];
            const len = new DataView(buf.buffer, buf.byteOffset, 5).getUint32(1);
            if (len > MAX_FRAME) throw new ConnectError('resource_exhausted', 'stream message of ' + len + ' bytes is over the console\'s limit of ' + MAX_FRAME);
            if (buf.length < 5 + len) break;
            const text = dec.decode(buf.subarray(5, 5 + len));
            buf = buf.slice(5 + len);
            if (flags & 0x01) throw new ConnectError('internal', 'compressed stream message: the console asks for none');
            const msg = text ? JSON.parse(text) : {};
            if (flags & 0x02) { // end of stream, with an error or none
              if (msg.error) throw new ConnectError(msg.error.code || 'unknown', msg.error.message || '');
              throw new ConnectError('unavailable', 'the server ended the stream');
            }
            if (!opened) { opened = true; attempt = 0; state({state: 'open'}); }
            if (msg.resumeToken) resume = msg.resumeToken;
            onMessage(msg);
          }
        }
      } catch (raw) {
        if (signal && signal.aborted) return;
        const err = toConnectError(raw);
        if (PERMANENT.has(err.code)) throw fail(err);
        attempt++;
        const delayMs = Math.round(Math.min(maxBackoffMs, 500 * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2));
        state({state: 'reconnecting', attempt, delayMs, error: err});
        await sleep(delayMs, signal);
      } finally {
        clearTimeout(watchdog);
        signal && signal.removeEventListener('abort', stop);
        ctl.abort();
      }
    }
  })();
}
