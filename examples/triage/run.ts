/**
 * The triage workflow embedded: code steps, a branch, and a person's approval, decided here by
 * code (a real program would ask someone: see README.md for the CLI and the page's button).
 * Run: npx tsx examples/triage/run.ts   (CI runs it through test/examples.test.ts)
 */
import { readFileSync } from 'node:fs';
import { createSwarm } from 'swarmstate';
import * as steps from './steps.mjs';

const plan = JSON.parse(readFileSync(new URL('./plan.json', import.meta.url), 'utf8'));
const swarm = createSwarm({ functions: steps, store: false });
// holdApprovals: the run waits for run.approve instead of ending `paused`.
const run = swarm.run(plan, { holdApprovals: true });
for await (const event of run) {
  if (event.type === 'approval:requested') {
    console.log(`approval asked: ${event.prompt}\n${event.draft}`);
    run.approve(event.taskId, { approved: true, note: 'looks right' });
  }
  if (event.type === 'task:skipped') console.log(`skipped ${event.taskId}: ${event.reason}`);
}
const result = await run.result;
console.log(`run ${result.status}: outbox ${JSON.stringify(result.tasks.outbox?.output)}, archive ${JSON.stringify(result.tasks.archive?.output)}`);
await swarm.close();
if (result.status !== 'completed') process.exitCode = 1;
