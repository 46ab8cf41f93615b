/**
 * package.json's `engines` is true to what is installed: every package of the lock file (the
 * service's and the tools the tests run) supports every Node.js version punctual says it runs on.
 * `npm ci` warned EBADENGINE for cookie and content-disposition (Node 22 only) while punctual said
 * Node 20 or later; they are held at releases that run on Node 20 (package.json `overrides`).
 */
import { readFileSync } from 'node:fs';
import semver from 'semver';
import { describe, expect, it } from 'vitest';

const root = (file: string) => JSON.parse(readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8'));

describe('engines', () => {
  it("admit only Node.js versions every installed package supports, this one's included", () => {
    const ours: string = root('package.json').engines.node;
    const lock: { packages: Record<string, { engines?: { node?: string } | string[] }> } = root('package-lock.json');
    const narrower = Object.entries(lock.packages)
      .map(([path, pkg]) => [path, Array.isArray(pkg.engines) ? undefined : pkg.engines?.node] as const)
      .filter(([path, range]) => path !== '' && range !== undefined && !semver.subset(ours, range))
      .map(([path, range]) => `${path.replace(/^node_modules\//, '')} needs ${range}`);
    expect(narrower).toEqual([]);
    expect(semver.satisfies(process.version, ours)).toBe(true);
  });
});
