// The telemetry of a worker's runs: a span per run continuing the producer's trace, the handler duration and wait
// histograms, and the active-handlers up-down counter. A no-op until the application installs an OpenTelemetry SDK.

import { type Span, SpanKind, SpanStatusCode, context, trace } from '@opentelemetry/api'
import { attrs, instruments } from './metrics.js'
import { storedTraceContext, tracer } from './tracing.js'

/** What a run's telemetry reads of its job. */
export interface RunSubject {
  id: string
  name: string
  attempts: number
  /** When the job became due, ms since the epoch (database clock). */
  runAtMs: number
  /** The context stored at add time (W3C trace context as JSON), or null. */
  traceContext: string | null
}

/** One run, from its handler's start to its end. */
export class RunTelemetry {
  private readonly span: Span
  private readonly startedAt = performance.now()

  constructor(
    private readonly queue: string,
    job: RunSubject,
  ) {
    const m = instruments()
    const a = attrs(queue)
    m.active.add(1, a)
    m.wait.record(Math.max(0, Date.now() - job.runAtMs) / 1000, a)
    this.span = tracer().startSpan(
      `process ${queue}`,
      {
        kind: SpanKind.CONSUMER,
        attributes: {
          'pgonce.queue': queue,
          'pgonce.job.id': job.id,
          'pgonce.job.name': job.name,
          'pgonce.job.attempt': job.attempts,
          'messaging.system': 'pgonce',
          'messaging.operation.type': 'process',
          'messaging.destination.name': queue,
        },
      },
      storedTraceContext(job.traceContext),
    )
  }

  /** Runs `fn` (the handler) with the run's span active: spans it starts are the run's children. */
  within<T>(fn: () => T): T {
    return context.with(trace.setSpan(context.active(), this.span), fn)
  }

  /** The handler returned (no error) or threw (`err`). */
  end(err?: Error): void {
    const m = instruments()
    const a = attrs(this.queue)
    m.duration.record((performance.now() - this.startedAt) / 1000, a)
    m.active.add(-1, a)
    if (err !== undefined) {
      this.span.recordException(err)
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: err.message })
    }
    this.span.end()
  }
}
