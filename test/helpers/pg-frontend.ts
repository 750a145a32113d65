/**
 * Reads what a client sent PostgreSQL (a proxy's recording of one connection, faults/helpers/proxy.ts): the startup
 * packet's parameters and the messages after it, so a test can say which statements a connection ran and how.
 */
export interface FrontendStream {
  /** The startup packet's parameters (user, database, options …); null when none was sent (a cancel request). */
  startup: Record<string, string> | null;
  /** `Q` a simple query, `P` a Parse (extended protocol) with its statement name, each with its SQL text. */
  statements: Array<{ kind: 'Q' | 'P'; name: string; text: string }>;
}

const PROTOCOL_3 = 196_608;
const SSL_REQUEST = 80_877_103;
const GSS_REQUEST = 80_877_104;

export function frontendRead(stream: Buffer): FrontendStream {
  let off = 0;
  let startup: Record<string, string> | null = null;
  while (off + 8 <= stream.length) {
    const len = stream.readInt32BE(off);
    const code = stream.readInt32BE(off + 4);
    if (code === SSL_REQUEST || code === GSS_REQUEST) {
      off += len;
      continue;
    }
    if (code === PROTOCOL_3) {
      const fields = stream.subarray(off + 8, off + len - 1).toString('utf8').split('\0');
      startup = {};
      for (let i = 0; i + 1 < fields.length; i += 2) startup[fields[i]!] = fields[i + 1]!;
      off += len;
    }
    break;
  }
  const statements: FrontendStream['statements'] = [];
  if (!startup) return { startup, statements };
  while (off + 5 <= stream.length) {
    const type = String.fromCharCode(stream[off]!);
    const len = stream.readInt32BE(off + 1);
    const body = stream.subarray(off + 5, off + 1 + len);
    off += 1 + len;
    if (type === 'Q') statements.push({ kind: 'Q', name: '', text: body.subarray(0, body.indexOf(0)).toString('utf8') });
    if (type === 'P') {
      const nameEnd = body.indexOf(0);
      const textEnd = body.indexOf(0, nameEnd + 1);
      statements.push({ kind: 'P', name: body.subarray(0, nameEnd).toString('utf8'), text: body.subarray(nameEnd + 1, textEnd).toString('utf8') });
    }
  }
  return { startup, statements };
}

/**
 * What in a connection's traffic relies on the session outliving a transaction, which a transaction-mode pooler
 * (PgBouncer) does not give: startup options, LISTEN, SQL-level PREPARE, a SET that is not LOCAL, a session-level
 * advisory lock, a cursor WITH HOLD, and (with `unnamedOnly`) a named protocol-level prepared statement.
 */
export function sessionStateUses(stream: FrontendStream, o: { unnamedOnly: boolean }): string[] {
  const found: string[] = [];
  if (stream.startup && 'options' in stream.startup) found.push(`startup options ${stream.startup.options}`);
  for (const s of stream.statements) {
    const statementStarts = s.text.split(';').map((part) => part.trim().toLowerCase());
    if (o.unnamedOnly && s.name) found.push(`named prepared statement ${s.name}`);
    if (/\blisten\s/i.test(s.text)) found.push(`LISTEN: ${s.text}`);
    if (statementStarts.some((t) => t.startsWith('prepare ') || t.startsWith('execute '))) found.push(`SQL PREPARE/EXECUTE: ${s.text.slice(0, 80)}`);
    if (statementStarts.some((t) => /^set\s+(?!local\b)/.test(t) || t.startsWith('reset ') || t.startsWith('set session'))) found.push(`session SET: ${s.text.slice(0, 80)}`);
    if (/pg_(try_)?advisory_lock(_shared)?\s*\(/i.test(s.text)) found.push(`session advisory lock: ${s.text.slice(0, 80)}`);
    if (/\bwith\s+hold\b/i.test(s.text)) found.push(`cursor WITH HOLD: ${s.text.slice(0, 80)}`);
  }
  return found;
}
