/**
 * SQLite's rows by the names both stores read them with (rows.ts checks each column): the file's
 * snake_case columns as the camel-case fields `MemoryStore` keeps.
 */
import type { AttemptDbRow, SummaryRow, TaskDbRow } from './sqliteSchema.js';
import type { RawAttempt, RawSummary, RawTask } from './rows.js';

export function rawSummary(row: SummaryRow): RawSummary {
  return {
    id: String(row.id),
    status: row.status,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    source: row.source,
    optionsJson: row.options_json,
    tasksTotal: row.tasks_total,
    tasksDone: row.tasks_done,
    costUsd: row.cost_usd,
  };
}

export function rawTask(row: TaskDbRow): RawTask {
  return {
    status: row.status,
    attempts: row.attempts,
    output: row.output,
    errorJson: row.error_json,
    reason: row.reason,
    usageJson: row.usage_json,
    costUsd: row.cost_usd,
    requests: row.requests,
    retries: row.retries,
    specJson: row.spec_json,
    parent: row.parent,
    extraJson: row.extra_json,
    rejectedJson: row.rejected_json,
    updatedAt: row.updated_at,
  };
}

export function rawAttempt(row: AttemptDbRow): RawAttempt {
  return {
    taskId: row.task_id,
    attempt: row.attempt,
    route: row.route,
    startedAt: row.started_at,
    endedAt: row.ended_at,
    status: row.status,
    requests: row.requests,
    usageJson: row.usage_json,
    costUsd: row.cost_usd,
  };
}
