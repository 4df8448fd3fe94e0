// Exports pgonce's metrics for Prometheus to scrape (docs/observability.md). Run: tsx examples/prometheus.ts
// Install first: npm install @opentelemetry/api @opentelemetry/sdk-metrics @opentelemetry/exporter-prometheus

import { metrics } from '@opentelemetry/api'
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus'
import { MeterProvider } from '@opentelemetry/sdk-metrics'

/** Installs a MeterProvider whose reader serves http://<host>:<port>/metrics; call it before creating pgonce's objects. */
export function servePrometheus(port = 9464): PrometheusExporter {
  const exporter = new PrometheusExporter({ port })
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [exporter] }))
  return exporter
}
