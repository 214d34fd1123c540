/**
 * Embedding swarmstate in a Node app: three model calls and a code step, on a scripted in-process provider.
 * Run: npx tsx examples/embed.ts   (CI runs it through test/examples.test.ts)
 */
import { createScriptedProvider, createSwarm, definePlan, type FnContext } from 'swarmstate';

// definePlan types the plan as it is written (a misspelt field is a compile error) and keeps its task ids.
const plan = definePlan({
  providers: { llm: { type: 'custom' } },
  models: { fast: { provider: 'llm', model: 'small-model', maxTokens: 256 } },
  tasks: [
    { id: 'facts', model: 'fast', prompt: 'List three facts about otters.' },
    { id: 'poem', model: 'fast', prompt: 'Write a haiku from these facts: {{facts}}', deps: ['facts'] },
    { id: 'title', model: 'fast', prompt: 'Give the poem a title: {{poem}}', deps: ['poem'] },
    // A code step: a function of yours runs between the calls, inside the DAG and the journal.
    { id: 'save', kind: 'fn', fn: 'save', deps: ['poem', 'title'] },
  ],
});

// A `custom` provider: any object with `call(request)`; this one answers from a function.
const llm = createScriptedProvider((req) => `(${req.meta.taskId}) answer to: ${req.messages.at(-1)?.content.length} block(s)`);

// Its value (JSON) is the task's output; it gets the deps' outputs, the ids, the attempt and an AbortSignal.
const save = async (ctx: FnContext) => ({ title: ctx.deps.title, chars: String(ctx.deps.poem).length });

const swarm = createSwarm({ providers: { llm }, functions: { save } });
const run = swarm.run(plan);
run.events.on('task:completed', (e) => console.log(`done ${e.taskId}: ${e.output.slice(0, 60)}`));
const result = await run.result;
console.log(`run ${result.status}: ${result.totals.completed}/${result.totals.tasks} tasks, ${result.totals.requests} calls`);
await swarm.close();
if (result.status !== 'completed') process.exitCode = 1;
