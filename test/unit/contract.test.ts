/**
 * The contract is the bottom layer and ships in @punctual/client: its files import typebox and
 * each other, nothing else. The client imports only the contract and its own files (Node's and the
 * web's built-ins aside). The client package's version
 * is punctual's, and it asks for the typebox the server is built with.
 */
import { readdirSync, readFileSync } from 'node:fs';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');

/** Every module a file names: static, type-only, re-exported and dynamic imports. */
const importsOf = (source: string) => ts.preProcessFile(source, true, true).importedFiles.map((file) => file.fileName);

describe('the contract', () => {
  const files = readdirSync(new URL('src/contract/', root)).filter((name) => name.endsWith('.ts'));

  it('imports nothing but typebox and its own files', () => {
    expect(files.length).toBeGreaterThan(5);
    const outside = files.flatMap((name) =>
      importsOf(read(`src/contract/${name}`))
        .filter((specifier) => specifier !== 'typebox' && !/^\.\/[\w-]+\.js$/.test(specifier))
        .map((specifier) => `${name}: ${specifier}`),
    );
    expect(outside).toEqual([]);
  });

  it('is all the TypeScript client imports', () => {
    const clientFiles = readdirSync(new URL('clients/ts/src/', root)).filter((name) => name.endsWith('.ts'));
    const outside = clientFiles.flatMap((name) =>
      importsOf(read(`clients/ts/src/${name}`))
        .filter((specifier) => specifier !== '../../../src/contract/index.js' && !/^\.\/[\w-]+\.js$/.test(specifier))
        .map((specifier) => `${name}: ${specifier}`),
    );
    expect(outside).toEqual([]);
    expect(importsOf(read('clients/ts/src/client.ts'))).toContain('../../../src/contract/index.js');
  });
});

describe('the client package', () => {
  const server = JSON.parse(read('package.json'));
  const client = JSON.parse(read('clients/ts/package.json'));

  it("has punctual's version and depends on typebox alone, the server's", () => {
    expect(client).toMatchObject({ name: '@punctual/client', version: server.version, license: 'MIT', type: 'module' });
    expect(client.dependencies).toEqual({ typebox: server.dependencies.typebox });
    expect(client.devDependencies).toBeUndefined();
  });

  it('is not what the server package exports: that is the library (createPunctual)', () => {
    expect(server.exports['.']).toEqual({ types: './dist/app/library.d.ts', default: './dist/app/library.js' });
    expect(JSON.stringify(server.exports)).not.toContain('clients');
  });
});
