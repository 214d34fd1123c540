/** definePlan at run time: the plan comes back as given, and runs as any plan does. */
import { describe, expect, it } from 'vitest';
import { createScriptedProvider, createSwarm, definePlan, validatePlan } from '../../src/index.js';

describe('definePlan', () => {
  it('returns the plan unchanged; it validates and runs', async () => {
    const written = {
      providers: { llm: { type: 'sim' as const } },
      models: { fast: { provider: 'llm', model: 'small' } },
      tasks: [
        { id: 'facts', model: 'fast', prompt: 'facts' },
        { id: 'poem', model: 'fast', prompt: 'poem from {{facts}}', deps: ['facts'] },
      ],
    };
    const plan = definePlan(written);
    expect(plan).toBe(written);
    expect(validatePlan(plan).ok).toBe(true);
    const swarm = createSwarm({ store: false, providers: { llm: createScriptedProvider((req) => `answer for ${req.meta.taskId}`) } });
    const result = await swarm.run(plan).result;
    await swarm.close();
    expect(result.status).toBe('completed');
    expect(result.tasks[plan.tasks[1].id]!.output).toBe('answer for poem');
  });
});
