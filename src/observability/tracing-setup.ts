import { context, trace } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Db } from '../db/handle.js';
import { packageVersion } from '../package-root.js';
import { dagentIdGenerator } from './trace-ids.js';
import { traceEmitterStart } from './tracing.js';
import { tracingWanted } from './tracing-env.js';

export { tracingWanted };

export interface Tracing {
  /** Emit what is pending, flush the exporter, and unregister. */
  shutdown(): Promise<void>;
}

/**
 * Register an OpenTelemetry SDK for this process (ids from trace-ids.ts, async-local context, a batching
 * exporter) and emit dagent's spans through it. Null when the environment does not ask for traces.
 */
export async function tracingStart(db: Db, env: NodeJS.ProcessEnv, log?: Logger): Promise<Tracing | null> {
  const kind = tracingWanted(env);
  if (!kind) return null;
  // CommonJS packages: the CLI bundle leaves them to Node (scripts/build-cli.mjs), which finds their named exports.
  const [sdk, resources, { AsyncLocalStorageContextManager }] = await Promise.all([
    import('@opentelemetry/sdk-trace-base'), import('@opentelemetry/resources'), import('@opentelemetry/context-async-hooks'),
  ]);
  const exporter = kind === 'console'
    ? new sdk.ConsoleSpanExporter()
    : new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  const resource = resources.resourceFromAttributes({ 'service.name': env.OTEL_SERVICE_NAME || 'dagent', 'service.version': packageVersion() })
    .merge(resources.detectResources({ detectors: [resources.envDetector] }));
  const provider = new sdk.BasicTracerProvider({ resource, idGenerator: dagentIdGenerator, spanProcessors: [new sdk.BatchSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(provider);
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const emitter = traceEmitterStart(db, { log });
  log?.info({ exporter: kind }, 'exporting traces');
  return {
    async shutdown() {
      await emitter.stop();
      await provider.shutdown().catch((err: unknown) => log?.warn({ err }, 'could not flush the trace exporter'));
      trace.disable();
      context.disable();
    },
  };
}
