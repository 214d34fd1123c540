/**
 * Entry points the package exports whose code loads on their first call, not with
 * `import 'swarmstate'`: each is async already, so it awaits its module (issue 27). The embedded
 * simulator (and js-tiktoken with it), the live page's server, and the events file reader.
 * `connectMcpServer` does the same in tools/connect.ts.
 */
import type { SimOptions, SimServer } from './sim/types.js';
import type { LiveUi, LiveUiOptions } from './ui/live.js';
import type { TimedRunEvent } from './swarmTypes.js';

/**
 * Starts a simulator on 127.0.0.1 (port 0: an ephemeral one): see sim/server.ts.
 * @throws TypeError naming the option when an option is out of range.
 */
export async function startSim(options: SimOptions = {}): Promise<SimServer> {
  const sim = await import('./sim/server.js');
  return sim.startSim(options);
}

/** Serves the run's live page on 127.0.0.1: see ui/live.ts. */
export async function startLiveUi(opts: LiveUiOptions): Promise<LiveUi> {
  const ui = await import('./ui/live.js');
  return ui.startLiveUi(opts);
}

/**
 * Reads an NDJSON event stream: one JSON object per line, blank lines skipped. Throws an
 * EventsFileError naming the line of the first bad one, or the fs error when it cannot be read.
 *
 * @example
 * const events = await readEvents('run.ndjson');
 * await writeFile('report.html', buildReport({ events }));
 */
export async function readEvents(path: string): Promise<TimedRunEvent[]> {
  const report = await import('./report/cli.js');
  return report.readEvents(path);
}
