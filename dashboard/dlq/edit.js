// @ts-check
// A dead letter's "Edit & retry" form: the task's prompt, input, priority and max attempts, filled from its
// current spec the first time it opens; only the fields changed are sent.
import { api, errorText } from '../api.js';
import { h, add } from '../dom.js';

/** @typedef {import('../../src/wire/dlq.js').DeadLetterListed} DeadLetterListed */
/** @typedef {import('../../src/wire/dlq.js').DlqShowAnswer} DlqShowAnswer */
/** What an edit changes, with the API's field names. @typedef {{ prompt?: string, input?: object, priority?: number, max_attempts?: number }} TaskEdit */

/**
 * The form, hidden until its card opens it, and `fill` to load the task into it.
 * @param {DeadLetterListed} entry
 * @param {string} path the entry's API path
 * @param {HTMLElement} out the card's message line
 * @param {(edit: TaskEdit) => void} save the edit, retried
 */
export function dlqEditForm(entry, path, out, save) {
  const editBox = h('div', { class: 'edit-box', hidden: true });
  let filled = false;
  const prompt = h('textarea', { rows: 5, class: 'edit-prompt', 'data-id': entry.id });
  const input = h('textarea', { rows: 6, class: 'edit-input mono', 'data-id': entry.id, spellcheck: 'false' });
  const inputErr = h('p', { class: 'field-error', role: 'alert' });
  const priority = h('input', { type: 'number', min: 0, max: 100, step: 1, class: 'edit-priority' });
  const maxAttempts = h('input', { type: 'number', min: 1, max: 100, step: 1, class: 'edit-max-attempts' });
  const submit = h('button', { type: 'button', class: 'primary', 'data-action': 'edit-retry', 'data-id': entry.id }, 'Save & retry');
  /** The fields as the task had them. @type {{ prompt?: string, input?: string, priority?: string, maxAttempts?: string }} */
  let original = {};
  /** @returns {{ value?: object, error?: string }} */
  const parseInput = () => {
    const text = input.value.trim();
    if (!text) return { value: undefined };
    try {
      const v = JSON.parse(text);
      if (!v || typeof v !== 'object' || Array.isArray(v)) return { error: 'Input must be a JSON object, like {"key": "value"}.' };
      return { value: v };
    } catch (err) {
      return { error: `Input is not valid JSON: ${/** @type {Error} */ (err).message}` };
    }
  };
  const checkInput = () => {
    const r = parseInput();
    inputErr.textContent = r.error ?? '';
    input.classList.toggle('invalid', !!r.error);
    submit.disabled = !!r.error;
    return r;
  };
  input.addEventListener('input', checkInput);
  async function fill() {
    if (filled) return;
    filled = true;
    try {
      const { task } = /** @type {DlqShowAnswer} */ (await api('GET', path));
      const was = {
        prompt: task.spec?.prompt ?? '', input: JSON.stringify(task.spec?.input ?? {}, null, 2),
        priority: String(task.priority), maxAttempts: String(task.maxAttempts),
      };
      original = was;
      prompt.value = was.prompt;
      input.value = was.input;
      priority.value = was.priority;
      maxAttempts.value = was.maxAttempts;
      checkInput();
    } catch (err) {
      filled = false;
      inputErr.textContent = `Could not load the task: ${errorText(err)}`;
    }
  }
  submit.addEventListener('click', () => {
    const parsed = checkInput();
    if (parsed.error) return;
    /** @type {TaskEdit} */
    const e = {};
    if (prompt.value !== original.prompt) e.prompt = prompt.value;
    if (input.value !== original.input) e.input = parsed.value ?? {};
    if (priority.value !== original.priority && priority.value !== '') e.priority = Number(priority.value);
    if (maxAttempts.value !== original.maxAttempts && maxAttempts.value !== '') e.max_attempts = Number(maxAttempts.value);
    if (Object.keys(e).length === 0) {
      out.className = 'action-msg error';
      out.textContent = 'Change at least one field to edit and retry (or use Retry).';
      return;
    }
    save(e);
  });
  add(editBox, h('h3', null, 'Edit the task, then retry it'),
    h('label', { class: 'block' }, 'Prompt', prompt),
    h('label', { class: 'block' }, 'Input (JSON object)', input), inputErr,
    h('div', { class: 'row' }, h('label', null, 'Priority ', priority), h('label', null, 'Max attempts ', maxAttempts)),
    h('div', { class: 'actions' }, submit));
  return { el: editBox, fill };
}
