import type { ServerProcess } from './server.js';

/** An open event stream (`GET /api/events`) of a server process and everything it has received so far. */
export async function eventStream(s: ServerProcess, token: string, query = '') {
  const ctl = new AbortController();
  const res = await fetch(`${s.url}/api/events${query}`, { headers: { authorization: `Bearer ${token}` }, signal: ctl.signal });
  let text = '';
  let ended = false;
  const reading = (async () => {
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      text += Buffer.from(value!).toString('utf8');
    }
    ended = true;
  })();
  return { status: res.status, text: () => text, ended: () => ended, close: async () => { ctl.abort(); await reading; } };
}
