/**
 * Every `swarmstate` command. A command is its own file in this folder (its help, its flags, its
 * `run`) plus its line here.
 */
import { approve } from './approve.js';
import type { Command } from './command.js';
import { demo } from './demo.js';
import { helpCommand } from './help.js';
import { init } from './init.js';
import { machines } from './machines.js';
import { report } from './report.js';
import { resume, retry } from './resume.js';
import { run } from './run.js';
import { runs } from './runs.js';
import { show } from './show.js';
import { sim } from './sim.js';
import { ui } from './ui.js';
import { validate } from './validate.js';
import { worker } from './worker.js';

export const COMMANDS: readonly Command[] = [run, resume, retry, approve, runs, show, ui, validate, report, demo, init, worker, sim, machines, helpCommand(() => COMMANDS)];

export function commandNamed(name: string): Command | undefined {
  return COMMANDS.find((c) => c.name === name);
}
