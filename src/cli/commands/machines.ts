/**
 * `swarmstate machines [--json]`: the statecharts of machines/, as `machine.toJSON()` gives them
 * (what the Stately editor imports), or a short list of their states.
 */
import { MACHINES } from '../../report/charts.js';
import { EXIT } from '../exit.js';
import type { Command } from './command.js';

interface StateJson {
  states?: Record<string, StateJson>;
}

/** `active`, `active.calling`, ...: every state of a machine as a dotted path, in definition order. */
export function statePaths(node: StateJson, prefix = ''): string[] {
  return Object.entries(node.states ?? {}).flatMap(([name, child]) => [prefix + name, ...statePaths(child, `${prefix}${name}.`)]);
}

export const machines: Command = {
  name: 'machines',
  summary: "List the runtime's statecharts, or write their definitions for the Stately editor.",
  usage: `Usage: swarmstate machines [--json]

Lists the XState machines of the runtime (machines/) with their states. With --json, one JSON
object by machine id, each the machine's definition (machine.toJSON()), ready to import into the
Stately editor or to draw.

Options:
  --json             The definitions as one JSON object on stdout.
  -h, --help         This help.`,
  options: { json: { type: 'boolean', default: false } },
  maxPositionals: 0,
  async run(args, io) {
    if (args.values.json) {
      io.out.write(JSON.stringify(Object.fromEntries(MACHINES.map((m) => [m.id, m.toJSON()])), null, 2) + '\n');
      return EXIT.ok;
    }
    const lines = MACHINES.map((m) => `${m.id.padEnd(12)} ${statePaths(m.toJSON() as StateJson).join(', ')}`);
    io.out.write(lines.join('\n') + '\n');
    return EXIT.ok;
  },
};
