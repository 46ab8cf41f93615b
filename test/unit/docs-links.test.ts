/**
 * The docs' links stay valid as files and headings move: every relative link in README.md,
 * docs/*.md and clients/*\/README.md names a file that exists, every `#anchor` (in the same file or
 * another) names a heading of its target by GitHub's slug (github-slugger, the rules GitHub
 * renders with), and every repository path the README and docs/ write in backticks exists.
 *
 * Markdown is read with marked's lexer, so links and code inside fenced code blocks are not taken
 * for links or paths, and links inside tables are.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import GithubSlugger from 'github-slugger';
import { lexer, marked, type Token } from 'marked';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];
const clientReadmes = readdirSync(join(root, 'clients'))
  .map((name) => `clients/${name}/README.md`)
  .filter((file) => existsSync(join(root, file)));

/** Top folders of the repository whose paths the docs name in backticks. */
const PATH = /^(?:src|test|ops|scripts|clients|drizzle|docs|\.ci)\/[^\s*?<>{}]*$/;

function tokens(file: string): Token[] {
  return lexer(readFileSync(join(root, file), 'utf8'));
}

function walk(list: Token[], visit: (token: Token) => void): void {
  void marked.walkTokens(list, visit);
}

/** A heading's text as GitHub shows it: the inline markup gone, code spans' text kept. */
function plain(list: Token[] | undefined): string {
  return (list ?? [])
    .map((token) => {
      if (token.type === 'html') return '';
      if ('tokens' in token && token.tokens) return plain(token.tokens);
      return 'text' in token ? String(token.text) : '';
    })
    .join('');
}

const anchorCache = new Map<string, Set<string>>();
/** The anchors GitHub gives a Markdown file's headings, repeats numbered as it does. */
function anchors(file: string): Set<string> {
  let found = anchorCache.get(file);
  if (!found) {
    const slugger = new GithubSlugger();
    found = new Set();
    const set = found;
    walk(tokens(file), (token) => {
      if (token.type === 'heading') set.add(slugger.slug(plain(token.tokens)));
    });
    anchorCache.set(file, found);
  }
  return found;
}

/** Every link and image target in a file, with the file it is relative to. */
function links(file: string): string[] {
  const found: string[] = [];
  walk(tokens(file), (token) => {
    if (token.type === 'link' || token.type === 'image') found.push(token.href);
  });
  return found;
}

/** What is wrong with one link of `file`, or undefined when it holds. */
function broken(file: string, href: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:|^\/\//i.test(href)) return undefined; // another site, mail: not ours to check
  const [path = '', hash] = href.split('#', 2);
  const target = path === '' ? file : relative(root, resolve(root, dirname(file), decodeURIComponent(path)));
  if (target.startsWith('..')) return `${href}: outside the repository`;
  if (!existsSync(join(root, target))) return `${href}: no file ${target}`;
  if (hash === undefined || hash === '') return undefined;
  if (!target.endsWith('.md')) return `${href}: an anchor into a file that is not Markdown`;
  if (!anchors(target).has(decodeURIComponent(hash))) return `${href}: ${target} has no heading #${hash}`;
  return undefined;
}

/** Repository paths written as code spans (not in code blocks) that do not exist. */
function missingPaths(file: string): string[] {
  const missing: string[] = [];
  walk(tokens(file), (token) => {
    if (token.type !== 'codespan') return;
    for (const part of token.text.split(/,\s*/)) {
      if (PATH.test(part) && !existsSync(join(root, part))) missing.push(part);
    }
  });
  return missing;
}

describe('the docs', () => {
  it('are the README, a contents page and the topic files, each linked from the README', () => {
    expect(docs).toContain('docs/README.md');
    expect(docs.length).toBeGreaterThan(10);
    const fromReadme = new Set(links('README.md').map((href) => href.split('#')[0]));
    const fromContents = new Set(links('docs/README.md').map((href) => `docs/${href.split('#')[0]}`));
    for (const file of docs.filter((name) => name !== 'README.md')) {
      expect(fromReadme, `README.md links ${file}`).toContain(file);
      if (file !== 'docs/README.md') expect(fromContents, `docs/README.md links ${file}`).toContain(file);
    }
  });

  it.each([...docs, ...clientReadmes])('%s: every relative link and anchor points at something that exists', (file) => {
    const hrefs = links(file);
    expect(hrefs.length, `${file} has links`).toBeGreaterThan(0);
    expect(hrefs.map((href) => broken(file, href)).filter(Boolean)).toEqual([]);
  });

  it.each(docs)('%s: every repository path it names in backticks exists', (file) => {
    expect(missingPaths(file)).toEqual([]);
  });

  it('checks what it says: a wrong file, a wrong anchor and a wrong path are caught', () => {
    expect(broken('docs/api.md', 'tasks.md#keys')).toBeUndefined();
    expect(broken('docs/api.md', '#routes')).toBeUndefined();
    expect(broken('docs/api.md', 'no-such-file.md')).toMatch(/no file docs\/no-such-file\.md/);
    expect(broken('docs/api.md', 'tasks.md#no-such-heading')).toMatch(/has no heading/);
    expect(broken('docs/api.md', '#no-such-heading')).toMatch(/has no heading/);
    expect(broken('README.md', 'https://example.com/#whatever')).toBeUndefined();
    // GitHub's slugs: punctuation dropped, a slash leaves two hyphens, an underscore stays.
    expect(anchors('docs/cluster.md')).toContain('running-on-a-galera-cluster--several-database-hosts');
    expect(anchors('docs/handlers.md')).toContain('close_order');
    expect(anchors('docs/tasks.md')).toContain('punctuals-clock-and-the-databases');
  });
});
