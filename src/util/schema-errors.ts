/**
 * One readable line from a list of JSON-schema errors (TypeBox's, same shape as Ajv's), naming
 * the field: "body/runAt must be string or integer", "body/misfire must be one of "run", "skip"".
 */
export interface SchemaError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: unknown;
}

/** A bound's error, which names its limit ("must be <= 10000"); undefined for any other. */
function bound(error: SchemaError): string | undefined {
  const { limit } = error.params as { limit?: number };
  if (limit === undefined) return undefined;
  return ['maximum', 'minimum', 'exclusiveMaximum', 'exclusiveMinimum'].includes(error.keyword) ? error.message : undefined;
}

export function describeErrors(errors: readonly SchemaError[], prefix: string): string {
  // "schema is false" repeats what additionalProperties says better.
  const useful = errors.filter((error) => error.keyword !== 'boolean');
  const first = useful[0];
  if (first === undefined) return `${prefix} is invalid`;
  const path = first.instancePath;
  const union = useful.find((error) => error.keyword === 'anyOf' && error.instancePath === path);
  const params = first.params as { additionalProperties?: string[]; allowedValue?: unknown };
  let message = first.message ?? 'is invalid';
  if (union !== undefined) {
    const branches = useful.filter((error) => error.instancePath === path && error.keyword !== 'anyOf');
    const constants = branches
      .filter((error) => error.keyword === 'const')
      .map((error) => JSON.stringify((error.params as { allowedValue?: unknown }).allowedValue));
    const types = branches.filter((error) => error.keyword === 'type').map((error) => (error.params as { type?: string }).type);
    // A number out of its range beside a null it might have been: the range is what went wrong
    // ("must be null" said nothing of the 10,000 it passed).
    const bounds = branches.map(bound).filter((text) => text !== undefined);
    if (bounds.length > 0) message = `${bounds.join(' and ')}${types.includes('null') ? ', or null' : ''}`;
    else if (constants.length > 0) message = `must be one of ${constants.join(', ')}`;
    else if (types.length > 0) message = `must be ${types.join(' or ')}`;
  } else if (params.additionalProperties !== undefined) {
    message = `must not have additional properties (${params.additionalProperties.join(', ')})`;
  }
  return `${prefix}${path} ${message}`;
}

/**
 * What a JSON value from a request must not have before anything walks or stores it: more
 * than `maxDepth` levels of nested arrays and objects (stack overflows; MySQL's JSON stops at
 * 100, MariaDB refuses 32), or a string with a lone surrogate (not Unicode: the database refuses
 * it). Iterative, so depth itself cannot hurt. Answers the problem, or undefined.
 */
export function jsonProblem(value: unknown, maxDepth: number): string | undefined {
  // Values and their depths on two stacks side by side, names read without their entries: this
  // runs for every item of a batch, and a pair or an entry a value is garbage a batch long.
  const values: unknown[] = [value];
  const depths: number[] = [0];
  while (values.length > 0) {
    const current = values.pop();
    const depth = depths.pop()!;
    if (typeof current === 'string') {
      if (!current.isWellFormed()) return 'must not contain a string that is not valid Unicode (a lone surrogate)';
      continue;
    }
    if (current === null || typeof current !== 'object') continue;
    if (depth >= maxDepth) return `must not nest more than ${maxDepth} levels deep`;
    const names = Object.keys(current);
    for (const name of names) {
      if (!name.isWellFormed()) return 'must not contain a name that is not valid Unicode (a lone surrogate)';
      values.push((current as Record<string, unknown>)[name]);
      depths.push(depth + 1);
    }
  }
  return undefined;
}
