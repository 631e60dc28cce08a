/**
 * Where the broker reads the time: milliseconds since the epoch. `Date.now` in production; a
 * broker started with its own clock (StartOptions.clock) reads every deadline, expiry and rate
 * window from it, so tests move time forward instead of sleeping.
 */
export type Clock = () => number;
