/**
 * Small helpers every machine shares, so each is written once.
 *
 * Run events leave the machines through their named `report` action, which src/ provides. An
 * action defined in setup() cannot name another of setup's actions with its types, so the one
 * cast that lets enqueueActions call `report` lives here.
 */
import type { RunEvent } from './protocol.js';

export function enqueueReport(enqueue: unknown, event: RunEvent): void {
  (enqueue as (action: { type: 'report'; params: RunEvent }) => void)({ type: 'report', params: event });
}

/** The child's id in `xstate.done.actor.<id>` / `xstate.error.actor.<id>` (or the event's own `actorId`). */
export function childIdOf(event: { type: string; actorId?: string }): string {
  if (event.actorId !== undefined) return event.actorId;
  const at = event.type.indexOf('.actor.');
  return at < 0 ? event.type : event.type.slice(at + '.actor.'.length);
}
