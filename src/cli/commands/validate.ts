/** `swarmstate validate <plan.json>`: every problem of a plan, nothing run. */
import { PlanValidationError, validatePlan } from '../../plan/index.js';
import { EXIT } from '../exit.js';
import { loadPlan } from '../runPlan.js';
import { errorText, jsonForTerminal, visible } from '../terminal.js';
import { functionsFlag, functionSteps, functionsUnchecked } from '../functions.js';
import { FUNCTIONS_HELP } from './run.js';
import type { Command } from './command.js';

export const validate: Command = {
  name: 'validate',
  summary: 'Check a plan and list every problem with its path; runs nothing.',
  usage: `Usage: swarmstate validate <plan.json> [--json] [--functions <steps.mjs>]

Checks a plan and lists every problem with its path (exit 2); runs nothing and contacts nothing.
With --functions, the functions the plan names must be among the module's; without it they are
not checked (a note says so).

Options:
  --json             Print {"valid": true|false, "problems": [{"path", "message"}], ...} to stdout
                     (exit codes as without it); "notes" lists what was not checked.
${FUNCTIONS_HELP}
  -h, --help         This help.`,
  options: { json: { type: 'boolean', default: false }, functions: { type: 'string' } },
  maxPositionals: 1,
  async run(args, io) {
    const json = args.values.json === true;
    // A module that cannot be loaded is said on stderr in both forms, as a plan that cannot be read.
    const functions = await functionsFlag(args.values.functions, io.err);
    if (functions === false) return EXIT.invalid;
    // A file that cannot be read or parsed is said on stderr in both forms: there is no plan to judge.
    const plan = await loadPlan(args.positionals[0], io.err);
    if (plan === undefined) return EXIT.invalid;
    const steps = functionSteps(plan);
    const notes = functions === undefined && steps.length > 0 ? [functionsUnchecked(steps)] : [];
    const withNotes = notes.length > 0 ? { notes } : {};
    if (!json) for (const note of notes) io.err.write(`note: ${visible(note)}\n`);
    // The CLI registers no in-process tools, so `validate` judges tool names as `run` would.
    const checked = validatePlan(plan, { tools: [], ...(functions !== undefined ? { functions } : {}) });
    if (!checked.ok) {
      if (json) io.out.write(jsonForTerminal({ valid: false, problems: checked.issues.map((i) => ({ path: i.path, message: i.message })), ...withNotes }) + '\n');
      else io.err.write(errorText(new PlanValidationError(checked.issues)) + '\n');
      return EXIT.invalid;
    }
    const counts = { tasks: checked.plan.tasks.length, models: Object.keys(checked.plan.models).length, providers: Object.keys(checked.plan.providers).length };
    if (json) io.out.write(jsonForTerminal({ valid: true, problems: [], ...counts, ...withNotes }) + '\n');
    else io.out.write(`plan is valid: ${counts.tasks} tasks, ${counts.models} models, ${counts.providers} providers\n`);
    return EXIT.ok;
  },
};
