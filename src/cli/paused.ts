/**
 * What the CLI says of approvals: the lines a run that ended `paused` leaves on stderr (which
 * approvals wait, the exact commands to decide and to go on), and the commands themselves.
 */
import type { RunEvent } from '../../machines/protocol.js';
import type { RunResult } from '../../machines/tasks/results.js';
import { redisForDisplay } from '../distributed/redis.js';
import { plural } from './format.js';
import { visible } from './terminal.js';

/** The flags that find a run's journal (and queue) again: what every command printed for it carries. */
export interface JournalFlags {
  store: string | undefined;
  redis?: string | undefined;
}

/** The approvals named one by one; the rest are counted. */
const SHOWN = 5;

/** `swarmstate <command> <runId> [<more>] --store <file>`: the flags that find the run come last. */
export function runCommandLine(command: string, runId: string, flags: JournalFlags, more = ''): string {
  const store = flags.store !== undefined ? ` --store ${flags.store}` : '';
  const redis = flags.redis !== undefined && command !== 'approve' ? ` --redis ${redisForDisplay(flags.redis)}` : '';
  return visible(`swarmstate ${command} ${runId}${more ? ` ${more}` : ''}${store}${redis}`);
}

/** What an approval asked, by task id: its last `approval:requested` in the stream. */
export function requestsOf(events: readonly RunEvent[]): Map<string, Extract<RunEvent, { type: 'approval:requested' }>> {
  const out = new Map<string, Extract<RunEvent, { type: 'approval:requested' }>>();
  for (const e of events) if (e.type === 'approval:requested') out.set(e.taskId, e);
  return out;
}

/**
 * The lines a paused run ends with (each ending in a line break):
 *
 *     paused: 1 approval waits: ok (approves draft: Send this reply?)
 *     decide: swarmstate approve Bx1 ok [--reject] [--note <text>] [--output <file>] --store runs.db
 *     then:   swarmstate resume Bx1 --store runs.db
 *
 * A journal kept in memory ended with the process: nothing can be decided later, and it says so.
 */
export function pausedLines(result: RunResult, events: readonly RunEvent[], flags: JournalFlags, inMemory: boolean): string {
  const asked = requestsOf(events);
  const waiting = Object.values(result.tasks).filter((t) => t.status === 'waiting').map((t) => t.id);
  const what = waiting.slice(0, SHOWN).map((id) => {
    const e = asked.get(id);
    return e ? `${id} (approves ${e.approves}: ${e.prompt})` : id;
  });
  const more = waiting.length > SHOWN ? `, and ${waiting.length - SHOWN} more` : '';
  const head = `paused: ${plural(waiting.length, 'approval waits', 'approvals wait')}: ${what.join(', ')}${more}`;
  if (inMemory) return `${visible(head)}\nthe journal was kept in memory: nothing is left to decide or resume (run with --store <file> to decide later)\n`;
  const lines = [visible(head)];
  for (const id of waiting.slice(0, SHOWN)) lines.push(`decide: ${runCommandLine('approve', result.runId, flags, `${id} [--reject] [--note <text>] [--output <file>]`)}`);
  if (waiting.length > SHOWN) lines.push(`decide: ${runCommandLine('show', result.runId, flags)} lists the others`);
  lines.push(`then:   ${runCommandLine('resume', result.runId, flags)}`);
  return lines.join('\n') + '\n';
}
