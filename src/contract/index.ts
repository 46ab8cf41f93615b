/**
 * punctual's HTTP contract: every TypeBox schema of the API and the types derived from them. The
 * server validates, serializes and documents with these; the clients are typed by them. So that a
 * client can ship them, nothing here imports anything but `typebox` and its own folder: this
 * folder is the bottom layer, and the server's folders read its names and bounds from it.
 */
export * from './auth.js';
export * from './batch.js';
export * from './bulk.js';
export * from './charts.js';
export * from './cluster.js';
export * from './errors.js';
export * from './health.js';
export * from './limits.js';
export * from './tasks.js';
export * from './types.js';
export * from './handler-module.js';
export * from './workers.js';
export * from './runs.js';
export * from './audit.js';
export * from './test-clock.js';
