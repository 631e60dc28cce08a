import type { WriteReporter, WriteWaiter } from './session-types';

/**
 * A {@link WriteWaiter} that counts what holds it: every storage write it depends on, plus its
 * owner until the owner has handed it out (so it cannot settle early). It settles once, when the
 * last hold is released, remembering the first failure. One object per message instead of a
 * promise per write. Subclasses say what settling does (queue a PUBACK, answer an HTTP request).
 */
export abstract class CountedWaiter implements WriteWaiter {
  /** The first write failure, when one failed. */
  error: unknown = undefined;
  protected pending = 1;
  protected failed = false;

  /** Called once, when nothing holds it any more. */
  protected abstract settled(failed: boolean): void;

  hold(): void {
    this.pending++;
  }

  release(): void {
    if (--this.pending === 0) this.settled(this.failed);
  }

  fail(err: unknown): void {
    if (!this.failed) {
      this.failed = true;
      this.error = err;
    }
    this.release();
  }

  add(write: Promise<unknown>, reporter?: WriteReporter, call = 'write'): void {
    this.pending++;
    write.then(
      () => this.release(),
      (err: unknown) => {
        reporter?.writeFailed(call, err);
        this.fail(err);
      },
    );
  }
}
