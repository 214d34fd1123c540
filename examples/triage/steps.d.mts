// Types of steps.mjs for run.ts: each export is a plan function.
import type { SwarmFunction } from 'swarmstate';

export declare const readTickets: SwarmFunction;
export declare const pickUrgent: SwarmFunction;
export declare const pickRest: SwarmFunction;
export declare const bundle: SwarmFunction;
export declare const writeOutbox: SwarmFunction;
export declare const archive: SwarmFunction;
