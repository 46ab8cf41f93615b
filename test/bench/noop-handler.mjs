/**
 * punctual's side of the lateness benchmark (test/bench/peers.ts), as a shop's handler module
 * (HANDLERS=…): `noop` does nothing but note how late it started, in the transaction that marks its
 * task done, the way a shop's own database handler runs.
 */
import { record } from './lateness-file.mjs';

export default [
  {
    type: 'noop',
    effect: 'database',
    payload: { type: 'object' },
    async run({ payload }) {
      record(payload.i, payload.due);
      return 'ok';
    },
  },
];
