/**
 * The TypeScript reading of the conformance cases (clients/conformance/cases.json, whose `about`
 * says what a step, a reference and a matcher are): steps run through an adapter that calls the
 * client under test, answers are held against what the case expects. The PHP, Python and Go
 * runners read the same file the same way, each in its own language.
 *
 * What it decides: a mismatch fails the case with the step, the path in the answer and both
 * values; `until` polls every 100 ms up to `within` (15 s), and an error while polling fails at
 * once; `received` (what the receiver got) is read here with fetch, it is not a client's call.
 */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

export interface Step {
  call: string;
  with?: Record<string, Json>;
  save?: string;
  expect?: Json;
  expectError?: Json;
  until?: Json;
  within?: number;
}

export interface Case {
  name: string;
  checks: string;
  skip?: Record<string, string>;
  steps: Step[];
}

/** A client's API error as the cases see it. */
export interface ErrorView {
  /** From the client's own error class where it has one per status: bad_request, not_found, conflict… */
  kind: string;
  status: number;
  code: string;
  message: string;
  task?: Json;
}

export interface Adapter {
  /** Calls the client; answers the result as JSON with the API's field names. */
  call(name: string, args: Record<string, Json>): Promise<Json>;
  /** The client's API error as an ErrorView; undefined for anything else (the case fails with it). */
  error(thrown: unknown): ErrorView | undefined;
}

export interface Placeholders {
  run: string;
  receiver: string;
  secret: string;
}

const POLL_MS = 100;
const DEFAULT_WITHIN_MS = 15_000;
const REFERENCE = /^\$([A-Za-z_]\w*)((?:\.[^.]+)*)$/;

function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function typeOf(value: Json | undefined): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

export class CaseRun {
  readonly #saved = new Map<string, Json>();

  constructor(
    readonly testCase: Case,
    readonly placeholders: Placeholders,
  ) {}

  /** The value with placeholders replaced in its strings and references to saved answers taken. */
  resolve(value: Json): Json {
    if (typeof value === 'string') {
      const reference = REFERENCE.exec(value);
      if (reference !== null) return this.#lookup(reference[1]!, reference[2]!);
      return value
        .replaceAll('{run}', this.placeholders.run)
        .replaceAll('{receiver}', this.placeholders.receiver)
        .replaceAll('{secret}', this.placeholders.secret);
    }
    if (Array.isArray(value)) return value.map((item) => this.resolve(item));
    if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, this.resolve(item)]));
    return value;
  }

  #lookup(name: string, path: string): Json {
    if (!this.#saved.has(name)) throw new Error(`the case refers to $${name}, which no earlier step saved`);
    let value: Json | undefined = this.#saved.get(name);
    for (const segment of path.split('.').slice(1)) {
      value = Array.isArray(value) ? value[Number(segment)] : isObject(value) ? value[segment] : undefined;
      if (value === undefined) throw new Error(`$${name}${path}: the saved answer has no ${segment}`);
    }
    return value!;
  }

  /** Where `actual` differs from `expected` (already resolved), one line each; none when it matches. */
  mismatches(expected: Json, actual: Json | undefined, at = ''): string[] {
    const here = at === '' ? 'the answer' : at;
    if (isObject(expected)) {
      const operators = Object.keys(expected).filter((key) => key.startsWith('$'));
      if (operators.length > 0) return this.#operator(expected, actual, here);
      if (!isObject(actual)) return [`${here}: expected an object, got ${JSON.stringify(actual)}`];
      return Object.entries(expected).flatMap(([key, item]) => this.mismatches(item, actual[key], `${at}${at === '' ? '' : '.'}${key}`));
    }
    if (Array.isArray(expected)) {
      if (!Array.isArray(actual)) return [`${here}: expected an array, got ${JSON.stringify(actual)}`];
      if (actual.length !== expected.length)
        return [`${here}: expected ${expected.length} items, got ${actual.length}: ${JSON.stringify(actual)}`];
      return expected.flatMap((item, index) => this.mismatches(item, actual[index], `${at}.${index}`));
    }
    return actual === expected ? [] : [`${here}: expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}`];
  }

  #operator(expected: { [key: string]: Json }, actual: Json | undefined, here: string): string[] {
    const [[operator, operand]] = Object.entries(expected) as [[string, Json]];
    const text = typeof operand === 'string' ? operand : JSON.stringify(operand);
    const fail = (what: string) => [`${here}: expected ${what}, got ${JSON.stringify(actual)}`];
    switch (operator) {
      case '$type':
        return typeOf(actual) === operand || (operand === 'number' && typeOf(actual) === 'integer') ? [] : fail(`a value of type ${text}`);
      case '$matches':
        return typeof actual === 'string' && new RegExp(text).test(actual) ? [] : fail(`a string matching /${text}/`);
      case '$contains':
        return typeof actual === 'string' && actual.includes(text) ? [] : fail(`a string containing ${JSON.stringify(operand)}`);
      case '$length':
        return Array.isArray(actual) && actual.length === operand ? [] : fail(`${text} items`);
      case '$not':
        return actual !== undefined && this.mismatches(operand, actual).length > 0 ? [] : fail(`anything but ${text}`);
      default:
        throw new Error(`unknown matcher ${operator}`);
    }
  }

  /** Runs every step through `adapter`; throws on the first step that does not answer as expected. */
  async run(adapter: Adapter): Promise<void> {
    for (const [index, step] of this.testCase.steps.entries()) {
      const label = `${this.testCase.name}, step ${index + 1} (${step.call})`;
      const answer = await this.#step(step, adapter, label);
      if (step.save !== undefined) this.#saved.set(step.save, answer);
    }
  }

  async #step(step: Step, adapter: Adapter, label: string): Promise<Json> {
    const args = this.resolve(step.with ?? {}) as Record<string, Json>;
    const call = () =>
      step.call === 'received'
        ? this.#received(typeof args.name === 'string' ? args.name : JSON.stringify(args.name))
        : adapter.call(step.call, args);
    if (step.expectError !== undefined) {
      const thrown = await call().then(
        (answer) => {
          throw new Error(`${label}: expected an error, got ${JSON.stringify(answer)}`);
        },
        (error: unknown) => error,
      );
      const view = adapter.error(thrown);
      if (view === undefined) throw thrown;
      this.#check(label, step.expectError, view as unknown as Json);
      return view as unknown as Json;
    }
    let answer = await call();
    if (step.until !== undefined) {
      const until = this.resolve(step.until);
      const deadline = Date.now() + (step.within ?? DEFAULT_WITHIN_MS);
      while (this.mismatches(until, answer).length > 0) {
        if (Date.now() > deadline) this.#check(`${label}, still after ${step.within ?? DEFAULT_WITHIN_MS} ms`, step.until, answer);
        await new Promise((resolve) => setTimeout(resolve, POLL_MS));
        answer = await call();
      }
    }
    if (step.expect !== undefined) this.#check(label, step.expect, answer);
    return answer;
  }

  #check(label: string, expected: Json, answer: Json): void {
    const problems = this.mismatches(this.resolve(expected), answer);
    if (problems.length > 0) throw new Error(`${label}:\n  ${problems.join('\n  ')}`);
  }

  async #received(name: string): Promise<Json> {
    const response = await fetch(`${this.placeholders.receiver}/received/${encodeURIComponent(name)}`);
    return (await response.json()) as Json;
  }
}
