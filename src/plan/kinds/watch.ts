/**
 * Kinds that act on another task's output (review's `reviews`, approval's `approves`, their
 * `WatchRule`s) in the plan's graph: the task named is another task of the list that this kind
 * may watch, it has one watcher of each kind at most, and the watcher's edges join the graph.
 * The watcher waits for the task it watches, and so the task's other dependents wait for the
 * watcher (they must not read an output that may still change), which can close a cycle. Of two
 * watchers of one task, the later stage (an approval) waits for the earlier one (a review).
 */
import { isRecord, issue, unknownName } from '../problems.js';
import type { PlanIssue } from '../validate.js';
import { kindOfTask, WATCH_RULES } from './index.js';
import type { Path, WatchRule } from './types.js';

/** Why an edge of the graph is there: the path a cycle through it is reported at, and a note. */
export interface EdgeLabel {
  readonly path: Path;
  readonly note?: string;
}

export function checkWatches(
  tasks: unknown[],
  ids: readonly (string | undefined)[],
  indexOf: ReadonlyMap<string, number>,
  edges: number[][],
  labels: EdgeLabel[][],
  out: PlanIssue[],
): void {
  const watchers = new Map<WatchRule, Map<number, number>>();
  tasks.forEach((t, i) => {
    if (!isRecord(t)) return;
    const rule = kindOfTask(t)?.watches;
    if (!rule) return;
    const watched = t[rule.field];
    const path = ['tasks', i, rule.field];
    // Missing: said with the kind's other required fields (kinds/check.ts).
    if (typeof watched !== 'string' || watched === '') return;
    const target = indexOf.get(watched);
    const mine = watchers.get(rule) ?? new Map<number, number>();
    const targetKind = target === undefined || !isRecord(tasks[target]) ? undefined : String((tasks[target] as Record<string, unknown>).kind ?? 'task');
    const refused = targetKind === undefined ? undefined : rule.refuses(targetKind, watched);
    if (watched === ids[i]) out.push(issue(path, rule.self));
    else if (target === undefined) out.push(issue(path, unknownName('task', watched, ids.filter((x): x is string => x !== undefined))));
    else if (mine.has(target)) out.push(issue(path, `task "${watched}" ${rule.taken} (tasks[${mine.get(target)}])`));
    else if (refused !== undefined) out.push(issue(path, refused));
    else {
      mine.set(target, i);
      watchers.set(rule, mine);
      if (!edges[i]!.includes(target)) {
        edges[i]!.push(target);
        labels[i]!.push({ path });
      }
    }
  });
  if (watchers.size === 0) return;
  // The stage of each watcher, by the task it watches: an earlier stage does not wait for a later one.
  const stageOf = (k: number, target: number): number | undefined => {
    for (const [rule, of] of watchers) if (of.get(target) === k) return rule.stage;
    return undefined;
  };
  for (const rule of WATCH_RULES) {
    const of = watchers.get(rule);
    if (!of) continue;
    for (let k = 0; k < edges.length; k++) {
      for (const target of [...edges[k]!]) {
        const watcher = of.get(target);
        if (watcher === undefined || watcher === k || edges[k]!.includes(watcher)) continue;
        const stage = stageOf(k, target);
        if (stage !== undefined && stage < rule.stage) continue;
        edges[k]!.push(watcher);
        labels[k]!.push({ path: ['tasks', k, 'deps'], note: rule.waitNote });
      }
    }
  }
}
