/**
 * mitt's ESM build exports a default function, but its typings are CommonJS-flavoured, so under
 * NodeNext TypeScript types the default import as the module object. This file holds the one cast.
 */
import mittModule, { type Emitter, type EventType } from 'mitt';

type Mitt = <Events extends Record<EventType, unknown>>() => Emitter<Events>;

const mittFn: Mitt = ((mittModule as unknown as { default?: Mitt }).default ?? (mittModule as unknown as Mitt));

export function createEmitter<Events extends Record<EventType, unknown>>(): Emitter<Events> {
  return mittFn<Events>();
}

export type { Emitter };
