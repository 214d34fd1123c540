/**
 * A binary min-heap over a comparator: O(log n) push and pop, for the ready queue of 10,000
 * tasks and the pool's lease queue. Mutable on purpose: it lives in machine context by reference,
 * so an event never copies it.
 */
export class Heap<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(items[i]!, items[parent]!)) break;
      // A swap through a local: the destructuring form allocated an array per step.
      const moved = items[i]!;
      items[i] = items[parent]!;
      items[parent] = moved;
      i = parent;
    }
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length > 0 && last !== undefined) {
      items[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let best = i;
        if (l < items.length && this.before(items[l]!, items[best]!)) best = l;
        if (r < items.length && this.before(items[r]!, items[best]!)) best = r;
        if (best === i) break;
        const moved = items[i]!;
        items[i] = items[best]!;
        items[best] = moved;
        i = best;
      }
    }
    return top;
  }

  drain(): T[] {
    const out: T[] = [];
    while (this.items.length > 0) out.push(this.pop()!);
    return out;
  }
}
