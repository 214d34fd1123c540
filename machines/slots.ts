/**
 * Agent actor ids are slot numbers within their group (`agent:0` .. `agent:<size-1>`), reused as
 * agents finish, and this table says which task attempt holds each slot. Why not `agent:<task>:<attempt>`? XState
 * copies the children map on every spawn and stop; with a new key each time V8 builds a new object
 * shape per agent, which cost about a sixth of the runtime at 10,000 tasks. A few ids, reused,
 * keep those copies cheap. The task and attempt travel in the agent's input, events and output.
 *
 * Per task a take and a release allocate nothing: the ids are built once per slot, the holders
 * are kept in two arrays (no object per attempt), and an id finds its slot through a map.
 */
export class AgentSlots {
  private readonly ids: string[] = [];
  private readonly slotOf = new Map<string, number>();
  private readonly tasks: (string | undefined)[] = [];
  private readonly attempts: number[] = [];
  private readonly free: number[] = [];
  /** The actor id the last `take` gave (read by the group's spawn, right after). */
  lastTaken = '';

  static readonly PREFIX = 'agent:';

  /** A free slot's actor id for this attempt. */
  take(taskId: string, attempt: number): string {
    let slot = this.free.pop();
    if (slot === undefined) {
      slot = this.ids.length;
      const id = AgentSlots.PREFIX + slot;
      this.ids.push(id);
      this.slotOf.set(id, slot);
    }
    this.tasks[slot] = taskId;
    this.attempts[slot] = attempt;
    this.lastTaken = this.ids[slot]!;
    return this.lastTaken;
  }

  /** Which attempt holds the slot of this actor id (undefined when none). */
  holder(actorId: string): { taskId: string; attempt: number } | undefined {
    const slot = this.slotOf.get(actorId);
    const taskId = slot === undefined ? undefined : this.tasks[slot];
    return taskId === undefined ? undefined : { taskId, attempt: this.attempts[slot!]! };
  }

  /** Whether a slot is held by this actor id. */
  holds(actorId: string): boolean {
    const slot = this.slotOf.get(actorId);
    return slot !== undefined && this.tasks[slot] !== undefined;
  }

  release(actorId: string): void {
    const slot = this.slotOf.get(actorId);
    if (slot === undefined || this.tasks[slot] === undefined) return;
    this.tasks[slot] = undefined;
    this.free.push(slot);
  }

  /** How many slots are held now. */
  get size(): number {
    return this.ids.length - this.free.length;
  }

  /** The actor ids of the slots held now. */
  held(): string[] {
    const out: string[] = [];
    for (let slot = 0; slot < this.ids.length; slot++) if (this.tasks[slot] !== undefined) out.push(this.ids[slot]!);
    return out;
  }

  static isAgent(actorId: string): boolean {
    return actorId.startsWith(AgentSlots.PREFIX);
  }
}
