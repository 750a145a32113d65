// Without imports: the CLI reads it for every command before it loads anything of OpenTelemetry.

/**
 * Exporting traces, when the standard OTEL_* variables ask for it: OTEL_TRACES_EXPORTER `otlp` or `console`, or
 * an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); never with OTEL_SDK_DISABLED
 * or OTEL_TRACES_EXPORTER `none`. Spans go over OTLP/HTTP (JSON); the exporter reads its endpoint, headers and
 * timeout from the environment as every OpenTelemetry SDK does. Nothing of the SDK is loaded otherwise.
 */
export function tracingWanted(env: NodeJS.ProcessEnv): 'otlp' | 'console' | null {
  if ((env.OTEL_SDK_DISABLED ?? '').toLowerCase() === 'true') return null;
  const exporters = (env.OTEL_TRACES_EXPORTER ?? '').split(',').map((e) => e.trim().toLowerCase()).filter(Boolean);
  if (exporters.includes('none')) return null;
  if (exporters.includes('console')) return 'console';
  if (exporters.includes('otlp') || env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) return 'otlp';
  return null;
}
