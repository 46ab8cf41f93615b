/** `T | null` as a schema: a field the API always sends, null when it has no value. */
import { Type, type TSchema } from 'typebox';

export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
