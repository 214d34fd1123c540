/**
 * Run events leave the machines through their named `report` action, which src/ provides. An
 * action defined in setup() cannot name another of setup's actions with its types, so the one
 * cast that lets enqueueActions call `report` lives here, shared by every machine.
 */
import type { RunEvent } from './protocol.js';

export function enqueueReport(enqueue: unknown, event: RunEvent): void {
  (enqueue as (action: { type: 'report'; params: RunEvent }) => void)({ type: 'report', params: event });
}
