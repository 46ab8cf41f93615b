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
    const constants = branches.filter((error) => error.keyword === 'const').map((error) => JSON.stringify((error.params as { allowedValue?: unknown }).allowedValue));
    const types = branches.filter((error) => error.keyword === 'type').map((error) => (error.params as { type?: string }).type);
    if (constants.length > 0) message = `must be one of ${constants.join(', ')}`;
    else if (types.length > 0) message = `must be ${types.join(' or ')}`;
  } else if (params.additionalProperties !== undefined) {
    message = `must not have additional properties (${params.additionalProperties.join(', ')})`;
  }
  return `${prefix}${path} ${message}`;
}
