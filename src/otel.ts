/**
 * The OpenTelemetry API, loaded when the first run makes its tracer (not with
 * `import 'swarmstate'`, issue 27). Node resolves `@opentelemetry/api` to its CommonJS build
 * for import and require alike, so this is the very instance an application's `import` gets
 * (and the API keeps its registered SDK on a global anyway).
 */
import { createRequire } from 'node:module';
import type * as Api from '@opentelemetry/api';

let api: typeof Api | undefined;

export function otel(): typeof Api {
  return (api ??= createRequire(import.meta.url)('@opentelemetry/api') as typeof Api);
}
