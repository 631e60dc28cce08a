import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileWatcher, serialized, type PluginLogger } from '../src';

const silent: PluginLogger = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

describe('serialized', () => {
  it('runs one task at a time and once more for the calls made meanwhile, however many', async () => {
    let running = 0;
    let most = 0;
    let runs = 0;
    let release: (() => void) | undefined;
    const run = serialized(
      () =>
        new Promise<void>((resolve) => {
          running++;
          most = Math.max(most, running);
          runs++;
          release = () => {
            running--;
            resolve();
          };
        }),
      () => false,
    );
    const first = run();
    await run(); // resolves at once: the running task will run again
    await run();
    expect(runs).toBe(1);
    release!();
    await new Promise((r) => setImmediate(r));
    expect(runs).toBe(2); // the two calls made meanwhile cost one more run
    release!();
    await first;
    expect(most).toBe(1);
    expect(runs).toBe(2);
  });

  it('does not run again once stopped', async () => {
    let runs = 0;
    let stopped = false;
    let release: (() => void) | undefined;
    const run = serialized(
      () =>
        new Promise<void>((resolve) => {
          runs++;
          release = resolve;
        }),
      () => stopped,
    );
    const first = run();
    void run();
    stopped = true;
    release!();
    await first;
    expect(runs).toBe(1);
  });
});

describe('FileWatcher', () => {
  it('calls onChange when the file is written (two quick writes: one call), and not after close', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bifro-watch-'));
    try {
      const file = path.join(dir, 'f.txt');
      writeFileSync(file, 'a');
      let changes = 0;
      const watcher = new FileWatcher({ file, pollMs: 50, debounceMs: 30, watch: true, logger: silent, onChange: () => changes++ });
      watcher.start();
      // Two writes within the debounce: one call from the folder watch (the poll may add one later).
      writeFileSync(file, 'bb');
      writeFileSync(file, 'ccc');
      const deadline = Date.now() + 3000;
      while (changes === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
      expect(changes).toBe(1);
      watcher.close();
      const seen = changes;
      writeFileSync(file, 'dddd');
      await new Promise((r) => setTimeout(r, 300));
      expect(changes).toBe(seen);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
