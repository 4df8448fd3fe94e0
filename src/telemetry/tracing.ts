// pgonce's traces through @opentelemetry/api: a span per add and per run, the add's context stored with the job so that
// the run's span continues the producer's trace. A no-op until the application installs a tracer provider.

import {
  type Attributes,
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  context,
  propagation,
  trace,
} from '@opentelemetry/api'
import { VERSION } from './version.js'

/** pgonce's tracer, from the tracer provider installed now. */
export const tracer = () => trace.getTracer('pgonce', VERSION)

/** Runs `fn` in a span of its own (the active context's child); ends it, recording an error thrown. */
export async function inSpan<T>(
  name: string,
  kind: SpanKind,
  attributes: Attributes,
  fn: (span: Span) => Promise<T>,
  parent: Context = context.active(),
): Promise<T> {
  return tracer().startActiveSpan(name, { kind, attributes }, parent, async (span) => {
    try {
      return await fn(span)
    } catch (err) {
      span.recordException(err as Error)
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message })
      throw err
    } finally {
      span.end()
    }
  })
}

/** The active context as the propagator writes it (W3C traceparent with the SDK's defaults), or null when there is none. */
export function currentTraceContext(): string | null {
  const carrier: Record<string, string> = {}
  propagation.inject(context.active(), carrier)
  return Object.keys(carrier).length === 0 ? null : JSON.stringify(carrier)
}

/** The producer's context stored with a job, to parent the run's span (a new trace when there is none). */
export function storedTraceContext(stored: string | null): Context {
  if (stored === null) return ROOT_CONTEXT
  try {
    return propagation.extract(ROOT_CONTEXT, JSON.parse(stored) as Record<string, string>)
  } catch {
    return ROOT_CONTEXT
  }
}

/** The attributes of a producer's span (queue.add, queue.addBulk) adding `items` jobs to `queue`. */
export function producerAttributes(queue: string, items: number): Attributes {
  return {
    'pgonce.queue': queue,
    'pgonce.items': items,
    'messaging.system': 'pgonce',
    'messaging.operation.type': 'send',
    'messaging.destination.name': queue,
  }
}

export { SpanKind }
