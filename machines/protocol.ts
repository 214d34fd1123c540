/**
 * The messages the swarmstate actors exchange, and the plain data they carry: one file per
 * concern under protocol/, all re-exported here so every import stays `./protocol.js`.
 *
 * Everything here is serializable data: no functions, no secrets. A key is always named by its
 * id (provider name and a short fingerprint), never by its value. `src/` translates between these
 * shapes and the wire; the machines only ever see these.
 *
 *   protocol/data.ts          usage, ErrorInfo (the journaled error codes), rate-limit hints, key limits
 *   protocol/conversation.ts  messages, a model call's input and output
 *   protocol/lease.ts         agent <-> pool <-> key
 *   protocol/breaker.ts       pool <-> breaker (and agent -> breaker: PEEK)
 *   protocol/toolBus.ts       agent <-> toolBus, and the executors' inputs
 *   protocol/ledger.ts        agent <-> ledger
 *   protocol/dispatch.ts      what dispatch and tool-call hooks see and decide
 *   protocol/agent.ts         supervisor <-> agent
 *   protocol/runEvents.ts     the run events and the run, task and key statuses
 */
export * from './protocol/data.js';
export * from './protocol/conversation.js';
export * from './protocol/lease.js';
export * from './protocol/breaker.js';
export * from './protocol/toolBus.js';
export * from './protocol/ledger.js';
export * from './protocol/dispatch.js';
export * from './protocol/agent.js';
export * from './protocol/runEvents.js';
