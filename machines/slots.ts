/**
 * Agent actor ids are slot numbers within their group (`agent:0` .. `agent:<size-1>`), reused as
 * agents finish, and this table says which task attempt holds each slot. Why not `agent:<task>:<attempt>`? XState
 * copies the children map on every spawn and stop; with a new key each time V8 builds a new object
 * shape per agent, which cost about a sixth of the runtime at 10,000 tasks. A few ids, reused,
 * keep those copies cheap. The task and attempt travel in the agent's input, events and output.
 */
export class AgentSlots {
  private readonly holders: ({ taskId: string; attempt: number } | undefined)[] = [];
  private readonly free: number[] = [];

  static readonly PREFIX = 'agent:';

  /** A free slot's actor id for this attempt. */
  take(taskId: string, attempt: number): string {
    const slot = this.free.pop() ?? this.holders.length;
    this.holders[slot] = { taskId, attempt };
    return AgentSlots.PREFIX + slot;
  }

  /** Which attempt holds the slot of this actor id (undefined when none). */
  holder(actorId: string): { taskId: string; attempt: number } | undefined {
    return this.holders[Number(actorId.slice(AgentSlots.PREFIX.length))];
  }

  release(actorId: string): void {
    const slot = Number(actorId.slice(AgentSlots.PREFIX.length));
    if (this.holders[slot] === undefined) return;
    this.holders[slot] = undefined;
    this.free.push(slot);
  }

  /** How many slots are held now. */
  get size(): number {
    return this.holders.length - this.free.length;
  }

  /** The actor ids of the slots held now. */
  held(): string[] {
    const out: string[] = [];
    for (let slot = 0; slot < this.holders.length; slot++) if (this.holders[slot] !== undefined) out.push(AgentSlots.PREFIX + slot);
    return out;
  }

  static isAgent(actorId: string): boolean {
    return actorId.startsWith(AgentSlots.PREFIX);
  }
}
