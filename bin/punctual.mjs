#!/usr/bin/env node
/**
 * The `punctual` command and what `npm start` runs: builds dist/ first when it is missing or
 * older than src/ (or refuses to start when that build fails), then runs the built service in
 * this same process. One process, so a supervisor's SIGTERM reaches the service itself.
 */
import { ensureBuild } from '../scripts/ensure-build.mjs';

ensureBuild();
await import('../dist/app/main.js');
