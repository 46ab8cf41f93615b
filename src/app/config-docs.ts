/**
 * The configuration reference in docs/configuration.md, generated from the table in
 * config-table.ts: one Markdown table per slice, then the checks across variables. The generated
 * part sits between two markers; the prose around it is written by hand and kept as it is.
 * `npm run docs:config` rewrites the part; a test fails when the file differs from what the
 * table generates, so the docs cannot drift from the code.
 */
import { RULES, SLICES, VARIABLES, type Derived, type Variable } from './config-table.js';

export const START_MARKER = '<!-- config:start -->';
export const END_MARKER = '<!-- config:end -->';

function shownDefault(variable: Variable): string {
  const fallback = variable.default;
  if (fallback === undefined) return '—';
  if (typeof fallback === 'object' && fallback !== null && 'shown' in fallback) return (fallback as Derived<unknown>).shown;
  return variable.kind.show(fallback);
}

function fromFile(name: string, variable: Variable): string {
  return variable.fromFile === true ? `; or \`${name}_FILE\`: the path of a file holding it (not both)` : '';
}

/** The generated part, markers excluded. */
export function renderConfigTables(): string {
  const variables = Object.entries(VARIABLES) as [string, Variable][];
  const sections = Object.entries(SLICES).map(([slice, title]) => {
    const rows = variables
      .filter(([, variable]) => variable.slice === slice)
      .map(
        ([name, variable]) =>
          `| \`${name}\` | ${variable.kind.type} | ${shownDefault(variable)} | ${variable.meaning}${fromFile(name, variable)} |`,
      );
    return [`### ${title}`, '', '| variable | type | default | meaning |', '| --- | --- | --- | --- |', ...rows].join('\n');
  });
  const rules = ['### Checked together', '', ...RULES.map((rule) => `- ${rule.says}`)].join('\n');
  return [...sections, rules].join('\n\n');
}

/** `document` with its generated part replaced by what the table generates now. */
export function withConfigTables(document: string): string {
  const start = document.indexOf(START_MARKER);
  const end = document.indexOf(END_MARKER);
  if (start === -1 || end < start) throw new Error(`the document has no ${START_MARKER} … ${END_MARKER} part`);
  return `${document.slice(0, start + START_MARKER.length)}\n${renderConfigTables()}\n${document.slice(end)}`;
}
