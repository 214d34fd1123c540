/** Plain-text output of the CLI: one line per notable event, and the end-of-run summary. */
import type { RunEvent } from '../../machines/protocol.js';
import type { RunResult } from '../../machines/runTable.js';

/** A line for the events worth a person's attention; undefined for the rest. */
export function formatEventLine(event: RunEvent): string | undefined {
  switch (event.type) {
    case 'run:started':
      return `run ${event.runId}: ${event.tasks} tasks`;
    case 'task:completed':
      return `  done     ${event.taskId}`;
    case 'task:retry':
      return `  retry    ${event.taskId} #${event.retry} in ${event.delayMs} ms (${event.error.code}: ${event.error.message})`;
    case 'task:failed':
      return `  ${event.willRetry ? 'failed*' : 'FAILED '}  ${event.taskId} (${event.error.code}: ${event.error.message})${event.willRetry ? ' - will retry' : ''}`;
    case 'task:skipped':
      return `  skipped  ${event.taskId} (${event.reason})`;
    case 'key:backoff':
      return `  key      ${event.keyId} backs off ${event.retryAfterMs} ms`;
    case 'key:revoked':
      return `  key      ${event.keyId} REVOKED`;
    case 'breaker:open':
      return `  breaker  ${event.route} OPEN for ${event.cooldownMs} ms after ${event.failures} failures`;
    case 'breaker:closed':
      return `  breaker  ${event.route} closed`;
    case 'run:cancelled':
      return `run cancelled: ${event.reason}`;
    default:
      return undefined;
  }
}

export function formatSummary(result: RunResult): string {
  const t = result.totals;
  const rows: [string, string][] = [
    ['run', `${result.runId} (${result.status})`],
    ['tasks', `${t.tasks}: ${t.completed} completed, ${t.failed} failed, ${t.skipped} skipped, ${t.cancelled} cancelled`],
    ['requests', `${t.requests} model calls, ${t.retries} retries`],
    ['tokens', `${t.usage.inputTokens} in, ${t.usage.outputTokens} out, ${t.usage.cacheReadTokens} cache read, ${t.usage.cacheWriteTokens} cache write`],
    ['cost', t.costUsd === null || t.costUsd === undefined ? 'unknown (no model has a price)' : `$${t.costUsd.toFixed(4)}`],
    ['duration', `${(t.durationMs / 1000).toFixed(2)} s`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  const failed = Object.values(result.tasks).filter((x) => x.status === 'failed');
  const lines = rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`);
  for (const f of failed.slice(0, 10)) lines.push(`  failed ${f.id}: ${f.error?.code}: ${f.error?.message}`);
  if (failed.length > 10) lines.push(`  ... and ${failed.length - 10} more failed`);
  return lines.join('\n');
}
