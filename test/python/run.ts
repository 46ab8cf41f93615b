/**
 * `npm run test:python`: the Python client's unittest suite, the conformance cases among them
 * (clients/python/tests/test_conformance.py), against a real punctual and the local MariaDB, the
 * way a Python shop would meet them. The common part (packages, build, database, server,
 * receiver, clean-up) is test/clients/run.ts.
 *
 * What it adds for Python:
 * - Python 3.9 or later, and Debian's mypy (python3-mypy, run by Debian's python3): the client is
 *   type-checked with `mypy --strict` (its settings are in pyproject.toml) before any service starts. The package
 *   has no dependencies, so nothing comes from a package index.
 * - The client is imported from its source (PYTHONPATH=src), as the tests would see it installed.
 * - unittest gets this script's arguments: `npm run test:python -- -k lease`.
 */
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { has, runClientTests } from '../clients/run.js';

const PYTHON_DIR = fileURLToPath(new URL('../../clients/python/', import.meta.url));
/** python3-mypy installs the module for Debian's own Python, not a command (that is the `mypy` package). */
const MYPY = ['/usr/bin/python3', '-m', 'mypy'] as const;

runClientTests({
  name: 'python',
  packages: [
    ['python3', () => has('python3', ['-c', 'import sys; sys.exit(sys.version_info < (3, 9))'])],
    ['python3-mypy', () => has(MYPY[0], [...MYPY.slice(1), '--version'])],
  ],
  prepare: () => execFileSync(MYPY[0], MYPY.slice(1), { cwd: PYTHON_DIR, stdio: 'inherit' }),
  // The worker loop's own tests (test_worker.py, test_trace_context.py) and docs/clients.md's example (test_docs_example.py).
  workerTypes: ['py_worker_job', 'py_idle_job', 'py_sigterm_job', 'py_trace_job', 'reset_membership'],
  command: ['python3', '-m', 'unittest', 'discover', '--start-directory', 'tests', '--verbose'],
  cwd: PYTHON_DIR,
  env: { PYTHONPATH: 'src', PYTHONDONTWRITEBYTECODE: '1' },
});
