import type { PluginKind } from '@bifro/spi';

/** Methods each storage domain store must have. */
const STORAGE_STORES = {
  sessions: ['get', 'put', 'delete', 'list'],
  inbox: ['append', 'read', 'commit', 'count'],
  inflight: ['put', 'remove', 'list', 'addIncoming', 'removeIncoming', 'listIncoming'],
  retained: ['put', 'delete', 'get', 'match', 'totals', 'list'],
} as const;

/** Methods each kind must have. */
const REQUIRED_METHODS: { readonly [K in PluginKind]: readonly string[] } = {
  auth: ['authenticate'],
  acl: ['checkPermission'],
  balancer: ['needRedirect'],
  events: ['report'],
  settings: ['provide'],
  throttler: ['hasResource'],
  storage: [],
};

type Shape = Record<string, unknown>;

const isFunction = (value: unknown): boolean => typeof value === 'function';

/**
 * What is wrong with the object a factory returned for a kind: missing required methods,
 * optional members of the wrong type. Empty when the instance fits.
 */
export function instanceProblems(kind: PluginKind, instance: unknown): string[] {
  if ((typeof instance !== 'object' && typeof instance !== 'function') || instance === null) {
    return [`the ${kind} factory returned ${instance === null ? 'null' : typeof instance} instead of an object`];
  }
  const shape = instance as Shape;
  const problems: string[] = [];
  for (const method of REQUIRED_METHODS[kind]) {
    if (!isFunction(shape[method])) problems.push(`${kind}.${method} is not a function`);
  }
  for (const hook of ['init', 'close'] as const) {
    if (shape[hook] !== undefined && !isFunction(shape[hook])) problems.push(`${kind}.${hook} is not a function`);
  }
  switch (kind) {
    case 'auth':
      problems.push(...authProblems(shape));
      break;
    case 'events':
      if (shape.eventTypes !== undefined && !isStringArray(shape.eventTypes))
        problems.push('events.eventTypes is not a list of event type names');
      break;
    case 'settings':
      if (shape.onChange !== undefined && !isFunction(shape.onChange)) problems.push('settings.onChange is not a function');
      break;
    case 'throttler':
      if (shape.quota !== undefined && !isFunction(shape.quota)) problems.push('throttler.quota is not a function');
      break;
    case 'storage':
      problems.push(...storageProblems(shape));
      break;
    default:
      break;
  }
  return problems;
}

function authProblems(shape: Shape): string[] {
  const problems: string[] = [];
  if (shape.authMethods !== undefined && !isStringArray(shape.authMethods)) problems.push('auth.authMethods is not a list of strings');
  if (shape.extendedAuth !== undefined && !isFunction(shape.extendedAuth)) problems.push('auth.extendedAuth is not a function');
  if (isStringArray(shape.authMethods) && shape.authMethods.length > 0 && !isFunction(shape.extendedAuth)) {
    problems.push('auth.authMethods is declared but auth.extendedAuth is missing');
  }
  return problems;
}

function storageProblems(shape: Shape): string[] {
  const problems: string[] = [];
  if (typeof shape.durable !== 'boolean') problems.push('storage.durable is not a boolean');
  for (const [store, methods] of Object.entries(STORAGE_STORES)) {
    const value = shape[store];
    if (typeof value !== 'object' || value === null) {
      problems.push(`storage.${store} is not an object`);
      continue;
    }
    for (const method of methods) {
      if (!isFunction((value as Shape)[method])) problems.push(`storage.${store}.${method} is not a function`);
    }
  }
  return problems;
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((item) => typeof item === 'string');
}
