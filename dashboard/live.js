// @ts-check
// Live state shared by the pages: the unfiltered event stream, the dead-letter
// count in the nav, and the page context that stops a page's streams and timers.
import { api, streamOpen } from './api.js';

/** @typedef {import('./api.js').StreamEvent} StreamEvent */
/** @typedef {import('../src/wire/dlq.js').DlqPageAnswer} DlqPageAnswer */

/** Coalesce bursts of stream events into one refetch at most this often. */
const REFETCH_MS = 250;
/** The longest wait between two tries of a load the network failed. */
const NETWORK_RETRY_MAX_MS = 10_000;
/** While no event stream is connected, live pages refetch this often instead. */
export const OFFLINE_POLL_MS = 10_000;

/** The unfiltered stream: DAG progress and every event, for the nav count and the DAG list. */
/** @type {Set<(e: StreamEvent) => void>} */
const globalListeners = new Set();
/** @type {(() => void) | undefined} */
let globalStop;
export const DLQ_EVENTS = new Set(['task.dead_lettered', 'dlq.retried', 'dlq.cancelled', 'dlq.edited', 'dag.cancelled', 'task.cancelled']);

export function globalStreamEnsure() {
  if (globalStop) return;
  globalStop = streamOpen('', (e) => {
    if (DLQ_EVENTS.has(e.type)) dlqCountRefreshSoon();
    for (const l of globalListeners) l(e);
  });
}

export function globalStreamStop() {
  globalStop?.();
  globalStop = undefined;
}

// ---------------------------------------------------------------- nav

/** @type {ReturnType<typeof setTimeout> | undefined} */
let dlqCountTimer;
export async function dlqCountRefresh() {
  try {
    const { entries } = /** @type {DlqPageAnswer} */ (await api('GET', '/api/dlq?limit=1000'));
    const el = /** @type {HTMLElement} */ (document.getElementById('dlq-count'));
    el.textContent = entries.length >= 1000 ? '1000+' : String(entries.length);
    el.classList.toggle('alert', entries.length > 0);
  } catch { /* shown on the next success */ }
}

export function dlqCountRefreshSoon() {
  if (dlqCountTimer) return;
  dlqCountTimer = setTimeout(() => { dlqCountTimer = undefined; void dlqCountRefresh(); }, REFETCH_MS);
}

// ---------------------------------------------------------------- page context

/**
 * Loads of one kind for a page (PageContext.refetcher): `load` fetches, `apply` shows what it answered, `fail` says
 * why it could not.
 * @template T
 * @typedef {{ load: () => Promise<T>, apply: (result: T) => void, fail?: (err: LoadError) => void }} Loads
 */
/**
 * What a failed load threw: an ApiError (its status: 0 when the network failed), or another error.
 * @typedef {Error & { status?: number }} LoadError
 */
/**
 * A page's loads of one kind: `now()` at once, `soon()` within a moment.
 * @typedef {{ now: () => Promise<void>, soon: () => void }} Refetcher
 */
/**
 * What a page holds while shown (pageContext).
 * @typedef {ReturnType<typeof pageContext>} PageContext
 */

/** What a page holds while shown: streams, timers and listeners, all stopped when the route changes. */
export function pageContext() {
  /** @type {Array<() => unknown>} */
  const cleanups = [];
  const ctx = {
    alive: true,
    /** @param {() => unknown} fn */
    onCleanup: (fn) => cleanups.push(fn),
    /**
     * @param {string} query
     * @param {(e: StreamEvent) => void} fn
     */
    stream: (query, fn) => cleanups.push(streamOpen(query, fn)),
    /** @param {(e: StreamEvent) => void} fn */
    onGlobal: (fn) => {
      globalListeners.add(fn);
      cleanups.push(() => globalListeners.delete(fn));
    },
    /**
     * @param {number} ms
     * @param {() => void} fn
     */
    every: (ms, fn) => {
      const t = setInterval(fn, ms);
      cleanups.push(() => clearInterval(t));
    },
    /**
     * Load and apply: `now()` at once, `soon()` at most every `ms`. One load at a time: asked for while one is
     * under way, it runs once more when that one ends, however often it was asked (a 3,000-task DAG's creation
     * events each ask; a browser given thousands of parallel fetches refuses them all), and answers arrive in
     * order. A load the network failed (no answer) or the server could not serve (503) is tried again, 1 s, 2 s,
     * 4 s … up to 10 s apart, while the page is shown.
     * @template T
     * @param {Loads<T>} fn
     * @returns {Refetcher}
     */
    refetcher: (fn, ms = REFETCH_MS) => refetcherCreate(ctx, fn, ms),
    close: () => {
      ctx.alive = false;
      for (const fn of cleanups.splice(0)) {
        try { fn(); } catch { /* already stopped */ }
      }
    },
  };
  return ctx;
}

/**
 * A page's loads of one kind (PageContext.refetcher says how they run), stopped with the page.
 * @template T
 * @param {{ alive: boolean, onCleanup: (fn: () => unknown) => unknown }} ctx
 * @param {Loads<T>} fn
 * @param {number} ms
 * @returns {Refetcher}
 */
function refetcherCreate(ctx, fn, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let retryTimer;
  let failures = 0;
  /** @type {Promise<void> | null} */
  let running = null;
  let again = false;
  const once = async () => {
    clearTimeout(retryTimer);
    try {
      const result = await fn.load();
      failures = 0;
      if (ctx.alive) fn.apply(result);
    } catch (e) {
      const err = /** @type {LoadError} */ (e);
      // A newer load is about to run: it says what is true now.
      if (!ctx.alive || again) return;
      fn.fail?.(err);
      if (err?.status === 0 || err?.status === 503) retryTimer = setTimeout(() => void now(), Math.min(NETWORK_RETRY_MAX_MS, 1000 * 2 ** failures++));
    }
  };
  const now = () => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      try {
        do {
          again = false;
          await once();
        } while (again && ctx.alive);
      } finally {
        running = null;
      }
    })();
    return running;
  };
  ctx.onCleanup(() => { clearTimeout(timer); clearTimeout(retryTimer); });
  return {
    now,
    soon: () => {
      if (timer) return;
      timer = setTimeout(() => { timer = undefined; void now(); }, ms);
    },
  };
}
