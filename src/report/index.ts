/**
 * Run reports: a self-contained HTML page from a run's event stream.
 *
 * @example
 * import { buildReport, readEvents } from './report/index.js';
 * await writeFile('report.html', buildReport({ events: await readEvents('run.ndjson') }));
 */
export { buildReport, renderReport, reportPage, type ReportInput, type RenderedReport } from './html.js';
export { readEvents, reportCommand, EventsFileError, REPORT_HELP } from './cli.js';
export { analyze } from './model.js';
export { stageOf, outcomeOf, OUTCOMES, type ReportModel, type Outcome, type Call } from './types.js';
