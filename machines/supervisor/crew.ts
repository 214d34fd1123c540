/**
 * The supervisor's book of its group actors (`group:<n>`): how many agents each holds. Agents
 * run under groups of at most `size`, so no actor has more than a bounded number of children:
 * XState copies an actor's children map on every spawn and stop, which with every agent a child
 * of the supervisor cost O(agents in flight) per agent. Groups are reused, never one per task:
 * there are at most ceil(maxInFlight / size) of them, spawned as they are first needed.
 *
 * Why 16 (issue 27; before, 32): a bigger group copies a bigger children map on each spawn and
 * stop (a dictionary once the group has stopped an agent), while more groups make every actor
 * stop scan more scheduled events (one deadline timer per busy group: XState's
 * scheduler.cancelAll). test/bench/groupSize.ts plays one spawn and stop with the other groups'
 * timers in the system: at 50 in flight groups of 16 cost about 5-10 µs less per task than
 * groups of 32, at 3,000 in flight (188 timers against 94) no more; groups of 8 save nothing
 * more at 50 and lose at 3,000.
 */
export const AGENTS_PER_GROUP = 16;

export class Crew {
  private readonly counts: number[] = [];
  /** Groups with room, as a stack: the one freed last is filled first. */
  private readonly room: number[] = [];
  private readonly hasRoom: boolean[] = [];
  /** Each group's actor id, built once (not a string per dispatch). */
  private readonly ids: string[] = [];
  /**
   * Attempts out as agents and not settled yet (what `maxInFlight` bounds). Kept here, mutable,
   * rather than in the supervisor's context: an assign per dispatch and per settle copied the
   * whole context twice per task for one number.
   */
  inFlight = 0;

  constructor(readonly size: number = AGENTS_PER_GROUP) {}

  static idOf(group: number): string {
    return `group:${group}`;
  }

  /** The actor id of a group spawned before (`group:<n>`). */
  id(group: number): string {
    return this.ids[group] ?? Crew.idOf(group);
  }

  /**
   * A place for one more agent: its group (`spawned` grows when that group must be spawned
   * first). A number, not an object, per dispatch.
   */
  take(): number {
    let group = this.room[this.room.length - 1];
    if (group === undefined) {
      group = this.counts.length;
      this.counts.push(0);
      this.ids.push(Crew.idOf(group));
      this.room.push(group);
      this.hasRoom[group] = true;
    }
    this.counts[group]! += 1;
    if (this.counts[group] === this.size) {
      this.room.pop();
      this.hasRoom[group] = false;
    }
    return group;
  }

  /** An agent of `group` ended. */
  release(group: number): void {
    const held = this.counts[group]!;
    if (!(held > 0) || held === Number.POSITIVE_INFINITY) return;
    this.counts[group]! -= 1;
    if (!this.hasRoom[group]) {
      this.room.push(group);
      this.hasRoom[group] = true;
    }
  }

  /** A group that crashed took its agents with it: it holds none, and is never used again. Returns how many it held. */
  drop(group: number): number {
    const held = this.counts[group] ?? 0;
    this.counts[group] = 0;
    this.hasRoom[group] = false;
    const at = this.room.indexOf(group);
    if (at >= 0) this.room.splice(at, 1);
    // Full forever: take() never picks it again.
    this.counts[group] = Number.POSITIVE_INFINITY;
    return held;
  }

  /** The groups holding agents now. */
  busy(): number[] {
    const out: number[] = [];
    for (let g = 0; g < this.counts.length; g++) if (this.counts[g]! > 0 && this.counts[g] !== Number.POSITIVE_INFINITY) out.push(g);
    return out;
  }

  /** Groups spawned so far. */
  get spawned(): number {
    return this.counts.length;
  }
}
