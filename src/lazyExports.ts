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

/**
 * Serves the run's live page on 127.0.0.1: see ui/live.ts. The page has every event from this
 * call on, as before its module loaded lazily: the events that come while it loads are held and
 * handed over with `opts.events` in the same tick as the page subscribes.
 */
export async function startLiveUi(opts: LiveUiOptions): Promise<LiveUi> {
  const early: TimedRunEvent[] = [];
  const hold = (_type: unknown, e: unknown) => void early.push(e as TimedRunEvent);
  opts.run.events.on('*', hold);
  let ui: typeof import('./ui/live.js');
  try {
    ui = await import('./ui/live.js');
  } finally {
    opts.run.events.off('*', hold);
  }
  return ui.startLiveUi({ ...opts, events: [...(opts.events ?? []), ...early] });
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
