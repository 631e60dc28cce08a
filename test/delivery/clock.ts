import { performance } from 'node:perf_hooks';

let last = 0;

/**
 * Milliseconds since the epoch, with sub-millisecond resolution and strictly increasing within
 * the process: two records taken one after the other compare in that order, whichever client
 * took them (the checker orders a SUBACK against a PUBLISH of another client this way).
 */
export function now(): number {
  const t = performance.timeOrigin + performance.now();
  last = t > last ? t : last + 0.001;
  return last;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

/** Waits for `promise` at most `ms`; true when it settled in time. The timer does not outlive it. */
export async function within(promise: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)));
  try {
    return await Promise.race([promise.then(() => true), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
