// The code steps of the triage plan (`kind: "fn"`): given to the CLI with `--functions`, and to
// createSwarm({ functions }) by run.ts. Each gets ctx: deps (parsed), item/inputs, signal, ids.
import { appendFile, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
/** Where the replies and the archive go (the environment may move them, e.g. to a temp dir). */
const outDir = () => process.env.TRIAGE_OUT ?? here;

export async function readTickets({ signal }) {
  const text = await readFile(join(here, 'tickets.jsonl'), { encoding: 'utf8', signal });
  return text.split('\n').filter((line) => line.trim() !== '').map((line) => JSON.parse(line));
}

const withUrgency = ({ deps }) => deps.tickets.map((ticket, i) => ({ ...ticket, ...deps.classify[i] }));

export const pickUrgent = (ctx) => withUrgency(ctx).filter((t) => t.urgency !== 'low').map(({ sim: _sim, ...t }) => t);
export const pickRest = (ctx) => withUrgency(ctx).filter((t) => t.urgency === 'low').map(({ sim: _sim, ...t }) => t);

/** The drafts, one per urgent ticket, as one list for the person to approve. */
export const bundle = ({ deps }) => deps.urgent.map((ticket, i) => ({ to: ticket.from, ticket: ticket.id, reply: deps.drafts[i] }));

/**
 * Writes the approved replies. At-least-once: a crash after the write and before the journal
 * records it runs this again, so each line carries a key (run, task) a reader can dedupe on.
 */
export async function writeOutbox({ deps, runId, taskId }) {
  const lines = deps.bundle.map((r) => JSON.stringify({ key: `${runId}/${taskId}/${r.ticket}`, ...r }));
  await appendFile(join(outDir(), 'outbox.jsonl'), lines.join('\n') + '\n');
  return { sent: lines.length };
}

export async function archive({ deps, runId }) {
  const lines = deps.rest.map((t) => JSON.stringify({ key: `${runId}/${t.id}`, id: t.id, topic: t.topic }));
  if (lines.length > 0) await appendFile(join(outDir(), 'archive.jsonl'), lines.join('\n') + '\n');
  return { archived: lines.length };
}
