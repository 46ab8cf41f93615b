#!/usr/bin/env node
/**
 * The `punctual` command and what `npm start` runs: builds dist/ first when it is missing or
 * older than src/ (or refuses to start when that build fails). With no command, or `start`
 * alone (or `start --test-clock`, TEST_CLOCK=on for a shop's tests), it runs the built service in
 * this same process, so a supervisor's SIGTERM reaches the service itself; any other command line (migrate, doctor, tasks, export, import, --help,
 * --version) is the CLI's (src/app/cli.ts), which exits when its command is done.
 */
import { ensureBuild } from '../scripts/ensure-build.mjs';

const args = process.argv.slice(2);
ensureBuild();
const testClock = args.length === 2 && args[0] === 'start' && args[1] === '--test-clock';
if (args.length === 0 || (args.length === 1 && args[0] === 'start') || testClock) {
  if (testClock) process.env.TEST_CLOCK = 'on';
  await import('../dist/app/main.js');
} else {
  const { runCli } = await import('../dist/app/cli.js');
  await runCli(args);
  process.exit(process.exitCode ?? 0);
}
