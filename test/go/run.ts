/**
 * `npm run test:go`: the Go client's tests, the conformance cases among them
 * (clients/go/conformance_test.go), against a real punctual and the local MariaDB, the way a Go
 * shop would meet them. The common part (packages, build, database, server, receiver, clean-up)
 * is test/clients/run.ts.
 *
 * What it adds for Go:
 * - Go is Debian's golang-go; the module has no dependencies, and no module proxy is asked for
 *   anything (GOPROXY=off, GOFLAGS=-mod=mod, GOTOOLCHAIN=local: the installed Go, no download).
 * - Before any service starts, gofmt must have nothing to change and `go vet` nothing to say.
 * - `go test` gets this script's arguments: `npm run test:go -- -run 'TestConformance/batch'`.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { has, runClientTests } from '../clients/run.js';

const GO_DIR = fileURLToPath(new URL('../../clients/go/', import.meta.url));
const GO_ENV = { ...process.env, GOFLAGS: '-mod=mod', GOPROXY: 'off', GOTOOLCHAIN: 'local', GOTELEMETRY: 'off' };

runClientTests({
  name: 'go',
  packages: [['golang-go', () => has('go', ['version'])]],
  prepare: () => {
    const unformatted = execFileSync('gofmt', ['-l', '.'], { cwd: GO_DIR, env: GO_ENV, encoding: 'utf8' }).trim();
    if (unformatted !== '') throw new Error(`gofmt would change: ${unformatted.split('\n').join(', ')} (run gofmt -w in clients/go)`);
    execFileSync('go', ['vet', './...'], { cwd: GO_DIR, env: GO_ENV, stdio: 'inherit' });
  },
  // The worker loop's own tests (worker_test.go, trace_test.go) and docs/clients.md's example (docs_example_test.go).
  workerTypes: ['go_worker_job', 'go_idle_job', 'go_lost_job', 'go_trace_job', 'reset_membership'],
  command: ['go', 'test', '-count=1', '-v', './...'],
  cwd: GO_DIR,
  env: GO_ENV,
});
