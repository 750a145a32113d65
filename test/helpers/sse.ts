/** A server-sent-events reader for tests: what a stream sent, parsed as the browser's EventSource parses it. */
export interface SseEvent { event: string; id?: string; data: string }

export async function sseConnect(url: string, o: { token?: string; lastEventId?: string } = {}) {
  const ctl = new AbortController();
  const headers: Record<string, string> = {};
  if (o.token) headers.authorization = `Bearer ${o.token}`;
  if (o.lastEventId !== undefined) headers['last-event-id'] = o.lastEventId;
  const res = await fetch(url, { headers, signal: ctl.signal });
  let buffer = '';
  const events: SseEvent[] = [];
  let ended = false;
  const reading = (async () => {
    if (!res.body) return;
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      const parsed = sseParse(buffer);
      events.push(...parsed.events);
      buffer = parsed.rest;
    }
    ended = true;
  })();
  return {
    status: res.status,
    /** The body when the answer was not a stream (an error's JSON). */
    json: async () => { await reading; return JSON.parse(buffer) as unknown; },
    events: () => events,
    ended: () => ended,
    done: () => reading,
    close: async () => { ctl.abort(); await reading; },
  };
}

/** The events of complete blocks in `text` (each ends with a blank line), and what is left of an incomplete last one. */
export function sseParse(text: string): { events: SseEvent[]; rest: string } {
  const events: SseEvent[] = [];
  let rest = text;
  let cut: number;
  while ((cut = rest.indexOf('\n\n')) >= 0) {
    const block = rest.slice(0, cut);
    rest = rest.slice(cut + 2);
    const e: SseEvent = { event: 'message', data: '' };
    const data: string[] = [];
    let fields = 0;
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const at = line.indexOf(':');
      const field = at < 0 ? line : line.slice(0, at);
      const value = at < 0 ? '' : line.slice(at + 1).replace(/^ /, '');
      if (field === 'event') e.event = value;
      else if (field === 'id') e.id = value;
      else if (field === 'data') data.push(value);
      else continue;
      fields++;
    }
    if (fields && (data.length || e.event !== 'message')) events.push({ ...e, data: data.join('\n') });
  }
  return { events, rest };
}
