import assert from 'node:assert/strict';
import type { Lifecycle } from '../common';
import { DEFAULT_CALL_TIMEOUT_MS, type InstanceFactory } from './conformance-case';

/** True when `value` has a callable `then` (a promise or promise-like). */
export function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function'
  );
}

/**
 * Calls `fn` and awaits its result, failing with a message naming `what` when it throws, rejects
 * or takes longer than `timeoutMs`.
 */
export async function call<T>(what: string, timeoutMs: number, fn: () => T | PromiseLike<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new assert.AssertionError({ message: `${what} did not settle within ${timeoutMs} ms` })), timeoutMs);
  });
  try {
    return await Promise.race([
      Promise.resolve()
        .then(fn)
        .catch((error: unknown) => {
          throw new assert.AssertionError({ message: `${what} threw: ${describeError(error)}` });
        }),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Calls a synchronous function, failing when it throws or returns a promise. */
export function callSync<T>(what: string, fn: () => T): T {
  let result: T;
  try {
    result = fn();
  } catch (error) {
    throw new assert.AssertionError({ message: `${what} threw: ${describeError(error)}` });
  }
  assert.ok(!isThenable(result), `${what} must answer synchronously, it returned a promise`);
  return result;
}

/** A short text for anything thrown. */
export function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return String(error);
}

/**
 * Creates an instance, runs its `init`, hands it to `check`, then runs `close` and `destroy`
 * whatever the check did.
 */
export async function withInstance<T extends Lifecycle>(
  factory: InstanceFactory<T>,
  check: (instance: T, timeoutMs: number) => Promise<void>,
): Promise<void> {
  const timeoutMs = factory.callTimeoutMs ?? DEFAULT_CALL_TIMEOUT_MS;
  const instance = await call('create()', timeoutMs, factory.create);
  try {
    if (instance.init) await call('init()', timeoutMs, () => instance.init?.());
    await check(instance, timeoutMs);
  } finally {
    try {
      if (instance.close) await call('close()', timeoutMs, () => instance.close?.());
    } finally {
      if (factory.destroy) await call('destroy()', timeoutMs, () => factory.destroy?.(instance));
    }
  }
}

/**
 * The standard lifecycle case of every kit: `create`, `init` and `close` resolve, and the
 * instance has the members the kind requires.
 */
export function lifecycleCheck<T extends Lifecycle>(requiredMethods: readonly string[]) {
  return async (instance: T): Promise<void> => {
    assert.ok(typeof instance === 'object' && instance !== null, 'create() must return an object');
    for (const m of requiredMethods) {
      assert.equal(typeof (instance as unknown as Record<string, unknown>)[m], 'function', `the instance must have a method ${m}()`);
    }
    for (const m of ['init', 'close'] as const) {
      const v: unknown = instance[m];
      assert.ok(v === undefined || typeof v === 'function', `${m} must be a function when present`);
    }
  };
}

/** Asserts a non-empty string. */
export function assertNonEmptyString(value: unknown, what: string): asserts value is string {
  assert.equal(typeof value, 'string', `${what} must be a string, got ${typeof value}`);
  assert.ok((value as string).length > 0, `${what} must not be empty`);
}

/** Asserts an optional record of string values. */
export function assertStringRecord(value: unknown, what: string): void {
  if (value === undefined) return;
  assert.ok(typeof value === 'object' && value !== null && !Array.isArray(value), `${what} must be an object`);
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    assert.equal(typeof v, 'string', `${what}.${k} must be a string`);
  }
}

/** Asserts optional MQTT 5 user properties: an array of [string, string] pairs. */
export function assertUserProperties(value: unknown, what: string): void {
  if (value === undefined) return;
  assert.ok(Array.isArray(value), `${what} must be an array of [name, value] pairs`);
  for (const pair of value as unknown[]) {
    assert.ok(Array.isArray(pair) && pair.length === 2, `${what} entries must be [name, value] pairs`);
    assert.equal(typeof pair[0], 'string', `${what} names must be strings`);
    assert.equal(typeof pair[1], 'string', `${what} values must be strings`);
  }
}

/**
 * True for a `Uint8Array` (a `Buffer` included) from any realm: `instanceof` fails for arrays
 * made in another V8 context, as jest's test sandbox does with Node's own Buffers.
 */
export function isBytes(value: unknown): value is Uint8Array {
  return ArrayBuffer.isView(value) && Object.prototype.toString.call(value) === '[object Uint8Array]';
}

/** Asserts an optional byte array. */
export function assertOptionalBytes(value: unknown, what: string): void {
  if (value === undefined) return;
  assert.ok(isBytes(value), `${what} must be a Uint8Array when present`);
}

/**
 * A plain-data copy of a value for deep comparison: byte arrays (Buffer or Uint8Array) become
 * `{ bytes: number[] }`, and object keys whose value is `undefined` are left out, so that a
 * backend that serialises (and returns Buffers, or drops absent optionals) compares equal.
 */
export function toComparable(value: unknown): unknown {
  if (isBytes(value)) return { bytes: Array.from(value) };
  // Array.from, not value.map: map would build the copy in the realm of `value`, and
  // deepStrictEqual compares prototypes.
  if (Array.isArray(value)) return Array.from(value as unknown[], toComparable);
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[key];
      if (v !== undefined) out[key] = toComparable(v);
    }
    return out;
  }
  return value;
}

/**
 * Deep equality of plain data that ignores the Buffer/Uint8Array difference, `undefined`-valued
 * keys and the realm objects and arrays were made in.
 */
export function assertSameData(actual: unknown, expected: unknown, message?: string): void {
  assert.deepStrictEqual(toComparable(actual), toComparable(expected), message);
}
