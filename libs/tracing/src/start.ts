import { setTracer } from './spans';

export interface TracingSettings {
  /** OTEL_EXPORTER_OTLP_ENDPOINT: the collector's base URL (spans go to `<it>/v1/traces`); null: off. */
  otelExporterOtlpEndpoint: string | null;
}

/** A part a service stops on shutdown (libs/lifecycle's Stoppable, by shape). */
interface Part {
  name: string;
  stop(): Promise<void>;
}

/**
 * Starts `start` (a service's composition) with tracing when OTEL_EXPORTER_OTLP_ENDPOINT is
 * set, and adds the exporter as the service's last part to stop, so the spans of the drain
 * itself are flushed on SIGTERM. Off, the SDK is not even loaded: the API alone, and the
 * helpers in spans.ts return at their first check.
 */
export async function withTracing<R extends { parts: Part[] }>(
  settings: TracingSettings,
  service: { name: string; version: string },
  start: () => Promise<R>,
): Promise<R> {
  const endpoint = settings.otelExporterOtlpEndpoint;
  if (endpoint === null) return start();
  // required here, not imported at the top: a process with tracing off never loads the SDK
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { startSdk } = require('./sdk') as typeof import('./sdk');
  const sdk = startSdk({ endpoint, serviceName: service.name, serviceVersion: service.version });
  setTracer(sdk.tracer);
  let running: R;
  try {
    running = await start();
  } catch (err) {
    await sdk.stop();
    setTracer(undefined);
    throw err;
  }
  running.parts.push({
    name: 'tracing',
    stop: async () => {
      await sdk.stop();
      setTracer(undefined);
    },
  });
  return running;
}
