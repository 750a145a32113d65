// @ts-check
// Talking to the server: the admin token (localStorage), the JSON fetch helper and
// the server-sent event stream reader (fetch-based: EventSource cannot send a header).

const TOKEN_KEY = 'dagent.token';
/** Wait before reconnecting a dropped event stream (the server's `retry:` says the same). */
const RECONNECT_MS = 2000;

/** Called when the server refuses the token; the router installs it (see app.js). */
let signOutHandler = /** @type {(message: string) => void} */ (() => {});
/** @param {(message: string) => void} fn */
export function onSignOut(fn) {
  signOutHandler = fn;
}
/** @param {string} message */
function signOut(message) {
  signOutHandler(message);
}

// ---------------------------------------------------------------- token

export function tokenGet() {
  return localStorage.getItem(TOKEN_KEY) ?? '';
}

/** @param {string} token */
export function tokenSet(token) {
  if (token) localStorage.setItem(TOKEN_KEY, token);
  else localStorage.removeItem(TOKEN_KEY);
}

/** `#token=…` in the URL: keep it, then drop it from the address bar and the history. */
export function tokenFromFragment() {
  const m = /^#token=([^&]+)/.exec(location.hash);
  if (!m) return;
  tokenSet(decodeURIComponent(m[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}#/`);
}

// ---------------------------------------------------------------- API

export class ApiError extends Error {
  /**
   * @param {number} status the HTTP status; 0 when the server could not be reached
   * @param {string} code the API's error code (`NOT_FOUND`, …), or `HTTP_<status>`
   * @param {string} message
   * @param {unknown} [body]
   */
  constructor(status, code, message, body) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/**
 * One API call; a non-2xx answer throws ApiError with the server's code and message. What it answers is described by
 * the route's response schema (src/wire/): the caller casts the answer to that schema's type (DagGraphAnswer, …).
 * @param {'GET' | 'POST'} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<unknown>}
 */
export async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { authorization: `Bearer ${tokenGet()}` };
  let payload;
  if (method !== 'GET') {
    headers['content-type'] = 'application/json';
    payload = JSON.stringify(body ?? {});
  }
  let res;
  try {
    res = await fetch(path, { method, headers, body: payload, cache: 'no-store' });
  } catch (err) {
    throw new ApiError(0, 'NETWORK', `cannot reach the server (${/** @type {Error} */ (err).message})`);
  }
  const text = await res.text();
  let json = null;
  try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
  if (!res.ok) {
    const e = json && typeof json === 'object' && json.error ? json.error : {};
    const err = new ApiError(res.status, e.code ?? `HTTP_${res.status}`, e.message ?? (text || res.statusText), json);
    if (res.status === 401) signOut(`The token was refused: ${err.message}`);
    throw err;
  }
  return json;
}

/** @param {unknown} err */
export function errorText(err) {
  if (err instanceof ApiError) return `${err.status ? `${err.status} ` : ''}${err.code}: ${err.message}`;
  return String(/** @type {{ message?: unknown } | undefined} */ (err)?.message ?? err);
}

// ---------------------------------------------------------------- event stream

export let liveStreams = 0;
/** @param {number} delta */
function liveChanged(delta) {
  liveStreams += delta;
  const el = /** @type {HTMLElement} */ (document.getElementById('live'));
  el.textContent = liveStreams > 0 ? 'live' : 'offline';
  el.classList.toggle('on', liveStreams > 0);
}

/**
 * An event of a server-sent-event stream: its type, its data as sent (parsed as JSON when it is), and the stream's last
 * event id so far (the `id:` of this event or an earlier one). /api/events (docs/http-api.md, "The event stream":
 * `snapshot`, `task.status`, `dag.progress` and the events table's types) is no JSON route, so its data has no schema
 * here; a task's stream's events are described under "Streams".
 * @typedef {{ type: string, data: any, id?: string }} StreamEvent
 */

/**
 * Parse `text/event-stream` chunks; calls onEvent({type, data, id}) per complete event.
 * @param {(e: StreamEvent) => void} onEvent
 * @returns {(chunk: string) => void}
 */
export function sseParser(onEvent) {
  let buf = '';
  let type = '';
  /** @type {string | undefined} */
  let id;
  /** @type {string[]} */
  let data = [];
  return (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      let line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      if (line === '') {
        if (data.length) {
          const raw = data.join('\n');
          let parsed = raw;
          try { parsed = JSON.parse(raw); } catch { /* plain text */ }
          try { onEvent({ type: type || 'message', data: parsed, id }); } catch (err) { console.error('stream handler failed', err); }
        }
        type = '';
        data = [];
        continue;
      }
      if (line.startsWith(':')) continue; // keepalive comment
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'event') type = value;
      else if (field === 'data') data.push(value);
      // As EventSource keeps it: the last id stands for the events after it that carry none.
      else if (field === 'id' && !value.includes('\0')) id = value;
    }
  };
}

/**
 * How a stream reader (sseFollow) behaves: `onEvent` per event; `resume`: reconnect with `Last-Event-ID` set to
 * the last event id received, as EventSource does (the server sends on after it); `onRefused`: a 4xx answer other
 * than 401 (which signs out) stops the reader and is passed here, where without it the reader tries again;
 * `live`: the connection counts in the nav's live/offline indicator.
 * @typedef {{ onEvent: (e: StreamEvent) => void, resume?: boolean, onRefused?: (err: ApiError) => void, live?: boolean }} SseFollow
 */

/**
 * Read the server-sent events at `path()` until stopped, reconnecting RECONNECT_MS after an error or the end of the
 * stream (the reader stops it when it has read what it wanted). Read with fetch: EventSource cannot send the
 * Authorization header, and a token in the URL would end up in logs and the history. Returns the stop function.
 * @param {() => string} path asked again at each connection (a reader may pin what it learned)
 * @param {SseFollow} o
 * @returns {() => void}
 */
export function sseFollow(path, o) {
  let stopped = false;
  /** @type {AbortController | undefined} */
  let ctrl;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  /** @type {string | undefined} */
  let lastEventId;
  const run = async () => {
    if (stopped) return;
    ctrl = new AbortController();
    let connected = false;
    try {
      /** @type {Record<string, string>} */
      const headers = { authorization: `Bearer ${tokenGet()}`, accept: 'text/event-stream' };
      if (o.resume && lastEventId !== undefined) headers['last-event-id'] = lastEventId;
      const res = await fetch(path(), { headers, signal: ctrl.signal, cache: 'no-store' });
      if (res.status === 401) {
        signOut('The token was refused by the event stream.');
        return;
      }
      if (o.onRefused && res.status >= 400 && res.status < 500) {
        const text = await res.text();
        let e = /** @type {{ code?: string, message?: string }} */ ({});
        try { e = JSON.parse(text).error ?? {}; } catch { /* not JSON */ }
        stopped = true;
        o.onRefused(new ApiError(res.status, e.code ?? `HTTP_${res.status}`, e.message ?? (text || res.statusText)));
        return;
      }
      if (!res.ok || !res.body) throw new Error(`event stream answered ${res.status}`);
      connected = true;
      if (o.live) liveChanged(+1);
      const reader = res.body.getReader();
      const decoder = new TextDecoder();
      const push = sseParser((e) => {
        lastEventId = e.id;
        o.onEvent(e);
      });
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        push(decoder.decode(value, { stream: true }));
      }
    } catch (e) {
      const err = /** @type {Error | undefined} */ (e);
      if (!stopped && err?.name !== 'AbortError') console.warn('event stream:', err?.message ?? err);
    } finally {
      if (connected && o.live) liveChanged(-1);
    }
    if (!stopped) timer = setTimeout(run, RECONNECT_MS);
  };
  void run();
  return () => {
    stopped = true;
    clearTimeout(timer);
    ctrl?.abort();
  };
}

/**
 * Read /api/events (with `query`, e.g. `?dag_id=…`) until stopped, reconnecting RECONNECT_MS after an error or the
 * end of the stream. Returns the stop function.
 * @param {string} query
 * @param {(e: StreamEvent) => void} onEvent
 * @returns {() => void}
 */
export function streamOpen(query, onEvent) {
  return sseFollow(() => `/api/events${query}`, { onEvent, live: true });
}
