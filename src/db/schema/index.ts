export * from './dags.js';
export * from './tasks.js';
export * from './edges.js';
export * from './attempts.js';
export * from './agents.js';
export * from './dead-letters.js';
export * from './events.js';
export * from './maintenance-gates.js';
