import { createServer } from 'node:http';

/** A span as an OTLP receiver got it: ids in hex, attribute values unwrapped. */
export interface ReceivedSpan {
  name: string;
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  attributes: Record<string, unknown>;
  /** The resource attributes of the process that sent it (service.name, …). */
  resource: Record<string, unknown>;
}

export interface OtlpReceiver {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT: the exporter posts to `${url}/v1/traces`. */
  url: string;
  spans: ReceivedSpan[];
  /** Requests it could not take (another path, not OTLP/JSON), as "METHOD path content-type". */
  refused: string[];
  close(): Promise<void>;
}

/** OTLP/JSON's AnyValue ({ stringValue: 'x' }, { intValue: 3 }, …) as the plain value. */
function anyValue(v: Record<string, unknown> | undefined): unknown {
  return v ? Object.values(v)[0] : undefined;
}

function attributesOf(list: Array<{ key: string; value?: Record<string, unknown> }> | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((a) => [a.key, anyValue(a.value)]));
}

/**
 * A local OpenTelemetry collector's OTLP/HTTP endpoint for traces, with JSON bodies (what
 * @opentelemetry/exporter-trace-otlp-http sends): it keeps every span posted to /v1/traces.
 */
export async function otlpReceiverStart(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const refused: string[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const type = req.headers['content-type'] ?? '';
      if (req.method !== 'POST' || req.url !== '/v1/traces' || !type.startsWith('application/json')) {
        refused.push(`${req.method} ${req.url} ${type}`);
        res.writeHead(415).end();
        return;
      }
      for (const rs of JSON.parse(body).resourceSpans ?? []) {
        const resource = attributesOf(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({ name: s.name, traceId: s.traceId, spanId: s.spanId, parentSpanId: s.parentSpanId || undefined, attributes: attributesOf(s.attributes), resource });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}`, spans, refused, close: () => new Promise<void>((r) => server.close(() => r())) };
}
