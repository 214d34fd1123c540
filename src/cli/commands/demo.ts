/** `swarmstate demo`: the catalog swarm on the embedded simulator. */
import { demoIntro, demoPlanPath } from '../demo.js';
import { FUNCTIONS_HELP, OUTPUT_FLAGS_HELP, RUN_ONLY_FLAGS_HELP, RUN_OPTIONS, runFromFile } from './run.js';
import type { Command } from './command.js';

const DEFAULT_REPORT = 'swarmstate-report.html';

export const demo: Command = {
  name: 'demo',
  summary: 'Run the catalog swarm on the embedded simulated provider: no key, no network.',
  usage: `Usage: swarmstate demo [--json] [--events <file.ndjson>] [--report [<file.html>]] [--quiet | --verbose]
                       [--stream] [--seed <n>] [--store <file>] [--redis <redis://host:6379>]
                       [--ui] [--inspect [--inspect-url <ws://...>]] [--real] [--functions <steps.mjs>]

Runs the catalog swarm (examples/catalog-swarm: maps and a reduce, 865 tasks, 3 keys with
limits, faults, MCP tools, a cached brief) on the embedded simulated provider, and writes its HTML report (${DEFAULT_REPORT}
unless --report names another file). No key, nothing leaves the machine.

Options:
${OUTPUT_FLAGS_HELP}
${RUN_ONLY_FLAGS_HELP}
${FUNCTIONS_HELP}
  -h, --help         This help.

Docs: docs/cli.md#the-demo`,
  options: RUN_OPTIONS,
  maxPositionals: 0,
  // The demo always writes its report: a bare --report (as in `--report --quiet`) means the default file.
  bareDefaults: { report: DEFAULT_REPORT },
  run(args, io) {
    const withReport = { ...args, values: { ...args.values, report: args.values.report ?? DEFAULT_REPORT } };
    return runFromFile('demo', demoPlanPath(), withReport, io, (plan) => {
      if (!args.values.json && !args.values.quiet) io.err.write(demoIntro(plan) + '\n');
    });
  },
};
