// @ts-check
// The dagent dashboard: a hash-routed single page over the HTTP API, no build step.
// Every call sends the admin token kept in localStorage; live views read the
// server-sent event stream with fetch (EventSource cannot send a header).
// All text goes into the DOM through textContent / text nodes: task outputs and
// errors are untrusted.
import { tokenGet, tokenSet, tokenFromFragment, onSignOut } from './api.js';
import { h, fill, link, main } from './dom.js';
import { globalStreamEnsure, globalStreamStop, pageContext, dlqCountRefresh } from './live.js';
import { pageDags } from './page-dags.js';
import { pageDag } from './page-dag.js';
import { pageTask } from './page-task.js';
import { pageDlq } from './page-dlq.js';
import { pageAgents } from './page-agents.js';
import { pageApprovals } from './page-approvals.js';
import { pageSpend } from './page-spend.js';
import { pageCompare } from './page-compare.js';

/** @typedef {import('./live.js').PageContext} PageContext */

/** @param {string} id */
const byId = (id) => /** @type {HTMLElement} */ (document.getElementById(id));

// ---------------------------------------------------------------- nav

/**
 * @param {boolean} signedIn
 * @param {string} active
 */
function navShow(signedIn, active) {
  byId('nav').hidden = !signedIn;
  byId('signout').hidden = !signedIn;
  for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', /** @type {HTMLElement} */ (a).dataset.nav === active);
}

// ---------------------------------------------------------------- router

/** @type {PageContext | undefined} */
let current;

/** @param {string} message */
function signOut(message) {
  tokenSet('');
  globalStreamStop();
  current?.close();
  current = undefined;
  pageLogin(message);
}

function route() {
  tokenFromFragment();
  current?.close();
  current = undefined;
  if (!tokenGet()) return pageLogin();
  globalStreamEnsure();
  const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean).map((p) => {
    try { return decodeURIComponent(p); } catch { return p; }
  });
  const ctx = pageContext();
  current = ctx;
  window.scrollTo(0, 0);
  void dlqCountRefresh();
  const [page, id, other] = parts;
  /** @type {Record<string, [string, () => void]>} */
  const pages = {
    '': ['dags', () => pageDags(ctx)],
    dags: ['dags', () => (id ? pageDag(ctx, id) : pageDags(ctx))],
    tasks: ['', () => pageTask(ctx, /** @type {string} */ (id))],
    dlq: ['dlq', () => pageDlq(ctx, id)],
    agents: ['agents', () => pageAgents(ctx)],
    spend: ['spend', () => pageSpend(ctx)],
    approvals: ['approvals', () => pageApprovals(ctx)],
    compare: ['dags', () => pageCompare(ctx, /** @type {string} */ (id), /** @type {string} */ (other))],
  };
  const found = Object.hasOwn(pages, page ?? '') ? pages[page ?? ''] : undefined;
  if (found && (page !== 'tasks' || id) && (page !== 'compare' || other)) {
    navShow(true, found[0]);
    found[1]();
    return;
  }
  navShow(true, '');
  fill(main, h('div', { class: 'card' }, h('h1', null, 'Not found'), h('p', null, 'No page at ', h('code', null, location.hash), '. ', link('#/', 'Back to the DAGs'))));
}

// ---------------------------------------------------------------- login

/** @param {string} [message] */
function pageLogin(message) {
  navShow(false, '');
  const input = h('input', { type: 'password', id: 'token-input', name: 'token', autocomplete: 'off', placeholder: 'dagent admin token', required: true, size: 48 });
  const msg = h('p', { class: 'error', role: 'alert' }, message ?? '');
  const form = h('form', { class: 'card login', id: 'token-form' },
    h('h1', null, 'Sign in'),
    h('p', { class: 'muted' }, 'Paste an admin token (create one with ', h('code', null, 'dagent tokens create --role admin'), '). It is kept in this browser\'s local storage.'),
    h('label', null, 'Token ', input),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Sign in')),
    msg);
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const token = input.value.trim();
    if (!token) return;
    tokenSet(token);
    route();
  });
  fill(main, form);
  input.focus();
}

// ---------------------------------------------------------------- start

onSignOut(signOut);
byId('signout').addEventListener('click', () => signOut('Signed out.'));
window.addEventListener('hashchange', route);
route();
