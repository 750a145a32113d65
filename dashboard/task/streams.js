// @ts-check
// A task's streams on its page (what its agent writes with ctx.stream): the list (GET /api/tasks/:id/streams) for a
// picker, and the chosen stream, `output` of the latest attempt unless another is picked, read as server-sent events
// (GET /api/tasks/:id/streams/:name) from its first chunk, so a reload shows it whole, then live until it ends, and
// how it ended. A dropped connection resumes after the last chunk shown (Last-Event-ID), so nothing shows twice.
//
// Agents' text is shown as text: appended to text nodes (HTML never parsed), every hidden character shown as an
// escape (visible-text.js), each JSON chunk a formatted block of its own. Cheap at any length: a chunk appends to
// the last text node (never the whole text again), and the page keeps the last SHOWN_CHARS_MAX characters.
import { api, errorText, sseFollow } from '../api.js';
import { h, fill, section } from '../dom.js';
import { visibleJson, visibleText } from '../visible-text.js';

/** @typedef {import('../live.js').PageContext} PageContext */
/** @typedef {import('../../src/wire/streams.js').StreamListAnswer} StreamListAnswer */
/** @typedef {import('../../src/wire/streams.js').StreamView} StreamView */
/** @typedef {import('../../src/wire/tasks.js').TaskView} TaskView */
/** @typedef {import('../api.js').StreamEvent} StreamEvent */
/**
 * A stream the picker offers: `pinned` when its row exists (read as `?fence=`: that claim's, exactly), else the stream the running attempt
 * has not written yet (the latest, which the server follows from before its first write).
 * @typedef {{ key: string, name: string, attempt: number, fence: number, pinned: boolean }} StreamChoice
 */

/**
 * What the page holds of a stream at most: its last million characters (an attempt's streams may hold 8 MiB);
 * the older ones are dropped, a text node at a time, and the page says how many.
 */
export const SHOWN_CHARS_MAX = 1_000_000;
/** Text goes into text nodes of about this size: an append copies only the last one, and the oldest drop whole. */
const TEXT_NODE_CHARS = 16_384;
/** While an attempt runs, its streams are listed again this often (a write is no event: a new name shows this way). */
const LIST_LIVE_MS = 5_000;
const HOLDING = new Set(['claimed', 'running']);
const DEFAULT_NAME = 'output';

/**
 * How a stream ended, in words.
 * @param {{ reason: string, outcome: string | null }} e
 */
function endText(e) {
  switch (e.reason) {
    case 'ended': return `Ended by its agent${e.outcome ? `; its attempt: ${e.outcome}` : ''}.`;
    case 'truncated': return 'Truncated: its attempt\'s streams reached their size limit (the attempt went on).';
    case 'attempt_ended': return `Ended with its attempt: ${e.outcome ?? 'ended'}.`;
    default: return `Ended (${e.reason}).`;
  }
}

/**
 * The streams a task's page offers, newest attempt first, by name within one (each claim's apart, by its fence: a
 * re-run numbers its attempts from 1 again), with the running attempt's `output` first when it has written none yet.
 * @param {StreamView[]} streams
 * @param {TaskView | undefined} task
 * @returns {StreamChoice[]}
 */
function choicesOf(streams, task) {
  /** @type {Map<string, StreamChoice>} */
  const choices = new Map();
  if (task && HOLDING.has(task.status) && !streams.some((s) => s.name === DEFAULT_NAME && s.fence === task.fence)) {
    choices.set(`${DEFAULT_NAME}@${task.fence}`, { key: `${DEFAULT_NAME}@${task.fence}`, name: DEFAULT_NAME, attempt: task.attempts, fence: task.fence, pinned: false });
  }
  for (const s of [...streams].sort((a, b) => b.fence - a.fence || (a.name < b.name ? -1 : 1))) {
    const key = `${s.name}@${s.fence}`;
    if (!choices.has(key)) choices.set(key, { key, name: s.name, attempt: s.attempt, fence: s.fence, pinned: true });
  }
  return [...choices.values()];
}

/**
 * The streams panel of a task's page: `el`, and `refresh(task)` to list its streams again within a moment (the page
 * calls it whenever its task changes: a new attempt is followed from its start).
 * @param {PageContext} ctx
 * @param {string} taskId
 */
export function taskStreamsPanel(ctx, taskId) {
  const status = h('p', { class: 'muted small', id: 'task-stream-status' });
  const picker = h('select', { 'aria-label': 'stream', id: 'task-stream-pick', hidden: true });
  const dropped = h('p', { class: 'muted small', id: 'task-stream-dropped', hidden: true });
  const waiting = h('p', { class: 'muted empty', id: 'task-stream-waiting' });
  const body = h('pre', { class: 'stream', id: 'task-stream' });
  const ending = h('p', { class: 'stream-end', id: 'task-stream-end', hidden: true });
  const listError = h('p', { class: 'error small', id: 'task-stream-list-error', hidden: true });
  const el = section('Streams', h('div', { class: 'head-row' }, status, picker), listError, dropped, waiting, body, ending);
  el.id = 'task-streams';
  el.hidden = true;

  /** @type {TaskView | undefined} */
  let task;
  /** @type {StreamChoice[]} */
  let choices = [];
  /** @type {string | undefined} a stream the person picked, else the default */
  let picked;
  /** @type {{ choice: StreamChoice, fence: number, stop: () => void } | undefined} */
  let following;
  // What the view shows of the stream followed: its last chunk's sequence, the characters held and dropped.
  let seq = 0;
  let chars = 0;
  let droppedChars = 0;
  /** @type {Text | undefined} the text node text chunks append to (until a JSON block comes between) */
  let tail;

  // Kept at its end while the person has not scrolled up, as a terminal does: once a frame, however many chunks came.
  let stick = true;
  let scrolling = false;
  body.addEventListener('scroll', () => { stick = body.scrollTop + body.clientHeight >= body.scrollHeight - 16; });
  const scrollSoon = () => {
    if (scrolling || !stick) return;
    scrolling = true;
    requestAnimationFrame(() => {
      scrolling = false;
      if (stick) body.scrollTop = body.scrollHeight;
    });
  };

  picker.addEventListener('change', () => {
    picked = picker.value;
    choose();
  });
  ctx.onCleanup(() => following?.stop());

  function choose() {
    const choice = choices.find((c) => c.key === picked)
      ?? choices.find((c) => c.name === DEFAULT_NAME) ?? choices[0];
    // Filled again only when what it offers changed: refilling closes it under the person's pointer.
    const offered = choices.map((c) => c.key).join(' ');
    if (picker.dataset.offered !== offered) {
      fill(picker, choices.map((c) => h('option', { value: c.key }, `${c.name} · attempt ${c.attempt}`)));
      picker.dataset.offered = offered;
    }
    if (choice) picker.value = choice.key;
    picker.hidden = choices.length < 2;
    // Shown once there is something to show: a stream listed, or the first chunk of the one a running attempt has
    // not written yet (most tasks stream nothing).
    el.hidden = !choices.some((c) => c.pinned) && seq === 0;
    if (!choice) {
      following?.stop();
      following = undefined;
      viewReset();
      status.textContent = '';
      return;
    }
    if (following && following.choice.key === choice.key && following.fence === choice.fence) return;
    follow(choice);
  }

  // ---------------------------------------------------------------- the view of one stream

  function viewReset() {
    seq = 0;
    chars = 0;
    droppedChars = 0;
    tail = undefined;
    body.replaceChildren();
    body.dataset.seq = '0';
    stick = true;
    dropped.hidden = true;
    ending.hidden = true;
    ending.textContent = '';
    delete ending.dataset.reason;
    waiting.hidden = false;
  }

  /** @param {string} text */
  function textAppend(text) {
    if (!text) return;
    if (!tail || tail.length >= TEXT_NODE_CHARS) {
      tail = document.createTextNode('');
      body.append(tail);
    }
    tail.appendData(text);
    chars += text.length;
  }

  /** @param {unknown} value */
  function jsonAppend(value) {
    const text = visibleJson(value);
    body.append(h('code', { class: 'stream-json' }, text));
    tail = undefined;
    chars += text.length;
  }

  /**
   * Past SHOWN_CHARS_MAX, the oldest nodes go (never the last: what is being written).
   * @param {StreamChoice} choice
   */
  function trim(choice) {
    let first;
    while (chars > SHOWN_CHARS_MAX && (first = body.firstChild) && first !== body.lastChild) {
      const n = (first.textContent ?? '').length;
      chars -= n;
      droppedChars += n;
      first.remove();
    }
    if (!droppedChars) return;
    dropped.hidden = false;
    dropped.textContent = `${droppedChars.toLocaleString('en')} earlier characters are not shown: the page keeps the last ${SHOWN_CHARS_MAX.toLocaleString('en')}. `
      + `dagent stream ${taskId} ${choice.name} --attempt ${choice.attempt} prints it all.`;
  }

  /** @param {StreamChoice} choice */
  function follow(choice) {
    following?.stop();
    viewReset();
    waiting.textContent = 'Nothing streamed yet.';
    let attempt = choice.attempt;
    /** @type {number | undefined} the attempt to reconnect to once its stream exists */
    let pin = choice.pinned ? choice.fence : undefined;
    /** @type {number | undefined} */
    let shownFence;
    let live = true;
    const statusShow = () => {
      status.textContent = `${choice.name} · attempt ${attempt}${live ? ' (live)' : ''} · ${seq} chunk(s)`;
    };
    statusShow();
    const path = () => `/api/tasks/${encodeURIComponent(taskId)}/streams/${encodeURIComponent(choice.name)}${pin !== undefined ? `?fence=${pin}` : ''}`;
    /** @param {StreamEvent} e */
    const onEvent = (e) => {
      if (!ctx.alive || following !== me) return;
      if (e.type === 'stream') {
        // Another attempt's stream than the one shown (a re-run numbered its attempts again): read it from its start.
        if (shownFence !== undefined && e.data.fence !== shownFence && seq > 0) {
          follow(choice);
          return;
        }
        shownFence = e.data.fence;
        me.fence = e.data.fence;
        attempt = e.data.attempt;
        statusShow();
      } else if (e.type === 'chunk') {
        const c = e.data;
        if (c.seq <= seq) return;
        if (typeof c.text === 'string') textAppend(visibleText(c.text));
        else jsonAppend(c.json);
        if (seq === 0) {
          waiting.hidden = true;
          el.hidden = false;
          // Its row exists now: a reconnect asks for this attempt's, not whichever is the latest by then.
          pin = shownFence;
        }
        seq = c.seq;
        body.dataset.seq = String(seq);
        trim(choice);
        statusShow();
        scrollSoon();
      } else if (e.type === 'end') {
        live = false;
        me.stop();
        statusShow();
        if (seq === 0) waiting.textContent = 'Nothing was streamed.';
        ending.hidden = false;
        ending.dataset.reason = String(e.data.reason);
        ending.textContent = endText(e.data);
        load.soon();
      }
    };
    const me = {
      choice,
      fence: choice.fence,
      stop: sseFollow(path, {
        resume: true,
        onEvent: (e) => onEvent(e),
        onRefused: (err) => {
          if (following !== me) return;
          live = false;
          status.textContent = `${choice.name} · attempt ${attempt}: ${errorText(err)}`;
        },
      }),
    };
    following = me;
  }

  const load = ctx.refetcher({
    load: () => /** @type {Promise<StreamListAnswer>} */ (api('GET', `/api/tasks/${encodeURIComponent(taskId)}/streams`)),
    apply: (answer) => {
      listError.hidden = true;
      choices = choicesOf(answer.streams, task);
      choose();
    },
    fail: (err) => {
      listError.hidden = false;
      listError.textContent = `Could not list the streams: ${errorText(err)}`;
    },
  });
  ctx.every(LIST_LIVE_MS, () => { if (task && HOLDING.has(task.status)) load.soon(); });

  return {
    el,
    /** @param {TaskView} t */
    refresh: (t) => {
      task = t;
      load.soon();
    },
  };
}
