/** Returned by {@link raceTimeout} when the deadline passed first. */
export const TIMED_OUT: unique symbol = Symbol('timed out');

/**
 * Waits for `pending` at most `ms` milliseconds. The timer is cleared as soon as `pending`
 * settles, so no timer outlives the call. A rejection of `pending` rejects the result.
 */
export function raceTimeout<T>(pending: PromiseLike<T>, ms: number): Promise<T | typeof TIMED_OUT> {
  return new Promise<T | typeof TIMED_OUT>((resolve, reject) => {
    const timer = setTimeout(() => resolve(TIMED_OUT), ms);
    pending.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}

/** Whether a plugin answer is a promise (or any thenable) rather than a direct value. */
export function isThenable<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}
