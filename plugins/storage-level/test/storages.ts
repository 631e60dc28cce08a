import { LevelStorage, type LevelStorageOptions } from '../src';

/** Storages a test opened, closed after it by {@link closeOpened}. */
const opened: LevelStorage[] = [];

/** Opens a level storage at `path` and remembers it for {@link closeOpened}. */
export async function openStorage(path: string, options: Partial<LevelStorageOptions> = {}): Promise<LevelStorage> {
  const storage = new LevelStorage({ path, ...options });
  await storage.init();
  opened.push(storage);
  return storage;
}

/** Closes every storage {@link openStorage} opened (an afterEach). */
export async function closeOpened(): Promise<void> {
  for (const s of opened.splice(0)) await s.close();
}

/** Forgets the opened storages without closing them (a test closed them itself). */
export function forgetOpened(): void {
  opened.length = 0;
}

/** The error `promise` rejects with. */
export async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof Error) return err;
    throw new Error(`rejected with a non-Error: ${String(err)}`);
  }
  throw new Error('expected a rejection');
}
