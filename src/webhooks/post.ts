import { lookup, type LookupAddress } from 'node:dns';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { BlockList, isIP, type LookupFunction } from 'node:net';

/**
 * Outgoing webhook POSTs, guarded against being pointed at the server's own
 * neighbourhood (SSRF): loopback, "this host" (0.0.0.0), link-local (which holds the
 * cloud metadata endpoint 169.254.169.254) and the other clouds' metadata addresses
 * are refused, both for an address written in the URL and for every address a name
 * resolves to when the POST is made (so a name that later resolves elsewhere, DNS
 * rebinding, is caught too). An operator may allow hosts by name (DAGENT_WEBHOOK_ALLOW_HOSTS).
 */
const FORBIDDEN = new BlockList();
FORBIDDEN.addSubnet('127.0.0.0', 8, 'ipv4');
FORBIDDEN.addSubnet('0.0.0.0', 8, 'ipv4');
FORBIDDEN.addSubnet('169.254.0.0', 16, 'ipv4');
FORBIDDEN.addAddress('100.100.100.200', 'ipv4'); // Alibaba Cloud metadata
FORBIDDEN.addAddress('::1', 'ipv6');
FORBIDDEN.addAddress('::', 'ipv6');
FORBIDDEN.addSubnet('fe80::', 10, 'ipv6');
FORBIDDEN.addAddress('fd00:ec2::254', 'ipv6'); // AWS metadata over IPv6

/** The 8 groups of an IPv6 address (`::` expanded, a dotted IPv4 tail as two groups), or null. */
function ipv6Groups(address: string): number[] | null {
  if (isIP(address) !== 6) return null;
  let text = address.toLowerCase().replace(/%.*$/, '');
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined];
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => parseInt(g, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/**
 * The IPv4 address an IPv6 address carries and reaches, or null: IPv4-mapped (::ffff:0:0/96),
 * IPv4-compatible (::/96), SIIT-translated (::ffff:0:0:0/96), NAT64 (64:ff9b::/96) and
 * 6to4 (2002::/16). Each is checked as the IPv4 address it leads to.
 */
function embeddedIpv4(address: string): string | null {
  const g = ipv6Groups(address);
  if (!g) return null;
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && (g[5] === 0xffff || (g[5] === 0 && (g[6] !== 0 || g[7]! > 1)))) return v4(g[6]!, g[7]!);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return v4(g[6]!, g[7]!);
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4(g[6]!, g[7]!);
  if (g[0] === 0x2002) return v4(g[1]!, g[2]!);
  return null;
}

/** Why dagent will not POST to this address, or null. */
export function addressRefusal(address: string): string | null {
  const carried = embeddedIpv4(address);
  const [addr, family] = carried ? [carried, 'ipv4' as const] : [address, isIP(address) === 6 ? 'ipv6' as const : 'ipv4' as const];
  if (!isIP(addr)) return null;
  const via = carried ? ` (it carries ${carried})` : '';
  return FORBIDDEN.check(addr, family) ? `${address} is a loopback, link-local or cloud-metadata address${via}` : null;
}

/** Why a webhook URL may not be used (its host is an address dagent refuses and not allowed), or null. */
export function webhookUrlRefusal(url: URL, allowHosts: readonly string[]): string | null {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (allowHosts.includes(host)) return null;
  if (host === 'localhost' || host.endsWith('.localhost')) return `${host} is this machine`;
  return addressRefusal(host);
}

/** A lookup that refuses any resolved address dagent will not POST to. */
function guardedLookup(allowHosts: readonly string[]): LookupFunction {
  return (hostname, options, callback) => {
    lookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const bad = allowHosts.includes(hostname) ? null : addresses.map((a) => addressRefusal(a.address)).find(Boolean);
      if (bad) return callback(Object.assign(new Error(`refused: ${hostname} resolves to ${bad.split(' ')[0]}, a loopback, link-local or cloud-metadata address`), { code: 'EADDRREFUSED' }), '', 0);
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      return callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };
}

export interface PostResult { status?: number; error?: string }

/**
 * POST `body` to `url` within `timeoutMs`; redirects are not followed, and no more than
 * `maxResponseBytes` of the answer is read (the connection is dropped beyond it).
 */
export function webhookPost(
  url: URL, headers: Record<string, string>, body: string, o: { timeoutMs: number; maxResponseBytes: number; allowHosts: readonly string[] },
): Promise<PostResult> {
  const refusal = webhookUrlRefusal(url, o.allowHosts);
  if (refusal) return Promise.resolve({ error: `refused: ${refusal} (allow it with DAGENT_WEBHOOK_ALLOW_HOSTS)` });
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    const done = (r: PostResult) => {
      if (!settled) { settled = true; resolve(r); }
    };
    const req = send(url, {
      method: 'POST',
      headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
      lookup: guardedLookup(o.allowHosts),
      signal: AbortSignal.timeout(o.timeoutMs),
    }, (res: IncomingMessage) => {
      let read = 0;
      res.on('data', (chunk: Buffer) => {
        read += chunk.length;
        // The answer's status is all that matters: a receiver that streams on is cut off.
        if (read > o.maxResponseBytes) res.destroy();
      });
      res.on('close', () => done({ status: res.statusCode }));
      res.on('error', () => done({ status: res.statusCode }));
    });
    req.on('error', (e: Error & { code?: string }) => {
      const error = e.name === 'AbortError' || e.name === 'TimeoutError' ? `timed out after ${o.timeoutMs / 1000}s` : `${e.code ?? e.name}: ${e.message}`;
      done({ error });
    });
    req.end(body);
  });
}

/** A URL as it may be shown: credentials in its user info and in secret-looking query parameters hidden. */
export function urlRedact(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return raw;
  }
  if (url.username || url.password) {
    url.username = '***';
    url.password = '';
  }
  for (const key of [...url.searchParams.keys()]) {
    if (/token|key|secret|pass|auth|sig|credential/i.test(key)) url.searchParams.set(key, '***');
  }
  return url.toString();
}
