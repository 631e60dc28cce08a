import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PluginLogger } from './common';

/** Options of {@link FileWatcher}. */
export interface FileWatcherOptions {
  /** Absolute path of the watched file (it may not exist). */
  readonly file: string;
  /** Milliseconds between two `stat` checks. */
  readonly pollMs: number;
  /** Quiet time after the last change seen before `onChange` is called. */
  readonly debounceMs: number;
  /** Whether to listen to `fs.watch` events on the file's folder besides polling. */
  readonly watch: boolean;
  readonly logger: PluginLogger;
  /** Called (debounced) when the file may have changed: written, replaced, created or removed. */
  readonly onChange: () => void;
}

/**
 * SPI 1.2.0: a helper for plugins that read a file and reload it on change (the first-party
 * settings-file, auth-file and acl-file plugins use it). Node built-ins only.
 *
 * Tells when a file may have changed. Two sources: `fs.watch` on the file's folder (fast; sees
 * editors that replace the file by renaming), and a `stat` poll of size, modification time and
 * inode (the fallback for file systems where events are unreliable or when the folder does not
 * exist yet). Both are debounced into one `onChange` call. Timers do not keep the process alive.
 */
export class FileWatcher {
  private watcher: fs.FSWatcher | undefined;
  private poller: NodeJS.Timeout | undefined;
  private debounce: NodeJS.Timeout | undefined;
  private signature: string;
  private polling = false;
  private closed = false;
  private readonly base: string;

  constructor(private readonly options: FileWatcherOptions) {
    this.base = path.basename(options.file);
    this.signature = statSignature(() => fs.statSync(options.file));
  }

  /** Starts watching and polling. */
  start(): void {
    if (this.options.watch) this.startWatch();
    this.poller = setInterval(() => void this.poll(), this.options.pollMs);
    this.poller.unref();
  }

  /** Stops everything; `onChange` is not called any more. */
  close(): void {
    this.closed = true;
    this.watcher?.close();
    this.watcher = undefined;
    clearInterval(this.poller);
    clearTimeout(this.debounce);
  }

  private startWatch(): void {
    const dir = path.dirname(this.options.file);
    try {
      const watcher = fs.watch(dir, { persistent: false }, (_event, filename) => {
        if (filename === null || filename === undefined || filename.toString() === this.base) this.changed();
      });
      watcher.on('error', (err: Error) => {
        this.options.logger.warn(`watching ${dir} failed (${err.message}); falling back to polling every ${this.options.pollMs} ms`, {
          dir,
          err: err.message,
        });
        watcher.close();
        if (this.watcher === watcher) this.watcher = undefined;
      });
      this.watcher = watcher;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.options.logger.debug(`cannot watch ${dir} (${message}); polling every ${this.options.pollMs} ms`, {
        dir,
        err: message,
      });
    }
  }

  private async poll(): Promise<void> {
    if (this.polling || this.closed) return;
    this.polling = true;
    try {
      const signature = await statSignatureAsync(this.options.file);
      if (this.closed || signature === this.signature) return;
      this.signature = signature;
      this.changed();
    } finally {
      this.polling = false;
    }
  }

  private changed(): void {
    if (this.closed) return;
    clearTimeout(this.debounce);
    this.debounce = setTimeout(() => {
      this.debounce = undefined;
      if (!this.closed) this.options.onChange();
    }, this.options.debounceMs);
    this.debounce.unref();
  }
}

function signatureOf(stat: fs.Stats): string {
  return `${stat.ino}:${stat.size}:${stat.mtimeMs}:${stat.ctimeMs}`;
}

function statSignature(stat: () => fs.Stats): string {
  try {
    return signatureOf(stat());
  } catch (err) {
    return `error:${(err as NodeJS.ErrnoException).code ?? 'unknown'}`;
  }
}

async function statSignatureAsync(file: string): Promise<string> {
  try {
    return signatureOf(await fs.promises.stat(file));
  } catch (err) {
    return `error:${(err as NodeJS.ErrnoException).code ?? 'unknown'}`;
  }
}

/**
 * Runs `task` one at a time (SPI 1.2.0): a call while it runs is not started beside it but makes
 * it run once more when it ends (however many calls came meanwhile), until `stopped()`. The reload
 * of a watched file: a change seen during a reload is read by the next one. A call made while the
 * task runs resolves at once; the others resolve when the runs they started are done.
 */
export function serialized(task: () => Promise<void>, stopped: () => boolean): () => Promise<void> {
  let running = false;
  let again = false;
  return async () => {
    if (running) {
      again = true;
      return;
    }
    running = true;
    try {
      do {
        again = false;
        await task();
      } while (again && !stopped());
    } finally {
      running = false;
    }
  };
}
