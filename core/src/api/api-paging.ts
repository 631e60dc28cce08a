import { ApiError } from './api-errors';

/** Query of a paged list: `limit` (1..1000, default 100) and the `cursor` of the previous page. */
export interface PageQuery {
  readonly limit?: number;
  readonly cursor?: string;
}

/** The JSON schema properties of {@link PageQuery}, for a route's `querystring`. */
export const PAGE_QUERY_PROPERTIES = {
  limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100, description: 'Most items on the page.' },
  cursor: { type: 'string', maxLength: 4096, description: 'The `nextCursor` of the previous page.' },
} as const;

/** The schema of a page of `item`: `{ items, nextCursor }` (nextCursor absent on the last page). */
export function pageSchema(item: object): object {
  return {
    type: 'object',
    required: ['items'],
    properties: {
      items: { type: 'array', items: item },
      nextCursor: { type: 'string', description: 'Pass as `cursor` for the next page; absent on the last page.' },
    },
  };
}

/**
 * A cursor is the key of the last item of a page, base64url: opaque to callers, stable across
 * changes (the next page starts after that key whatever was added or removed meanwhile).
 */
export function encodeCursor(key: string): string {
  return Buffer.from(key, 'utf8').toString('base64url');
}

/** The key a cursor stands for; 400 when it is not one this API made. */
export function decodeCursor(cursor: string | undefined): string | undefined {
  if (cursor === undefined || cursor === '') return undefined;
  if (!/^[A-Za-z0-9_-]+$/.test(cursor))
    throw new ApiError('BIFRO_API_INVALID_REQUEST', 'querystring/cursor: not a cursor returned by this API');
  return Buffer.from(cursor, 'base64url').toString('utf8');
}

/** A page answer: the items, and the cursor of the last one when there may be more. */
export function page<T>(items: readonly T[], limit: number, keyOf: (item: T) => string): { items: readonly T[]; nextCursor?: string } {
  if (items.length < limit || items.length === 0) return { items };
  return { items, nextCursor: encodeCursor(keyOf(items[items.length - 1]!)) };
}
