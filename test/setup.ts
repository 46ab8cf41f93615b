/** Runs in every test file: whatever happens in it, it leaves no server process behind. */
import { afterAll } from 'vitest';
import { killLeftoverServers } from './helpers/server.js';

afterAll(() => {
  killLeftoverServers();
});
