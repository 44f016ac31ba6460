import { hostname } from 'node:os';
import { trace, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME, ATTR_SERVICE_VERSION } from '@opentelemetry/semantic-conventions';

/**
 * The SDK, loaded only when tracing is on (start.ts imports this file on demand): a
 * NodeTracerProvider (AsyncLocalStorage context, W3C trace context propagation) exporting in
 * batches over OTLP/HTTP with JSON bodies. The batch delay and sizes are the SDK's standard
 * variables (OTEL_BSP_SCHEDULE_DELAY, default 5 s; OTEL_BSP_MAX_QUEUE_SIZE: spans past it are
 * dropped, never buffered without bound), as are OTEL_RESOURCE_ATTRIBUTES and
 * OTEL_SERVICE_NAME, which win over the names given here.
 */
export function startSdk(options: { endpoint: string; serviceName: string; serviceVersion: string }): { tracer: Tracer; stop(): Promise<void> } {
  const resource = resourceFromAttributes({
    [ATTR_SERVICE_NAME]: options.serviceName,
    [ATTR_SERVICE_VERSION]: options.serviceVersion,
    // semconv's incubating names (stable packages export only the stable ones)
    'service.namespace': 'tes',
    'service.instance.id': `${hostname()}-${process.pid}`,
    'process.pid': process.pid,
    'process.runtime.name': 'nodejs',
    'process.runtime.version': process.versions.node,
  }).merge(detectResources({ detectors: [envDetector] }));
  const exporter = new OTLPTraceExporter({ url: `${options.endpoint.replace(/\/+$/, '')}/v1/traces` });
  const provider = new NodeTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(exporter)] });
  provider.register();
  return {
    tracer: trace.getTracer('tes'),
    // flushes what is batched (bounded by the exporter's timeout), then unregisters
    stop: async () => {
      await provider.shutdown();
      trace.disable();
    },
  };
}
