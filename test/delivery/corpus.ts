import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Problem, Schedule, StorageKind } from './model';
import { summarize } from './schedule';

/**
 * The corpus: schedules that once failed, one JSON file each in test/fixtures/delivery-corpus/,
 * replayed before anything else by every run. A file keeps the whole schedule, so it replays the
 * same clients and faults even after the generator changed.
 */
export const CORPUS_DIR = path.resolve(__dirname, '..', 'fixtures', 'delivery-corpus');

export interface CorpusEntry {
  readonly seed: number;
  readonly index: number;
  readonly storage: StorageKind;
  readonly reproduce: string;
  readonly found: string;
  readonly summary: readonly string[];
  readonly problems: readonly Problem[];
  readonly schedule: Schedule;
}

export function readCorpus(dir = CORPUS_DIR): { file: string; entry: CorpusEntry }[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => {
      const entry = JSON.parse(readFileSync(path.join(dir, file), 'utf8')) as CorpusEntry;
      if (typeof entry.schedule !== 'object' || entry.schedule === null || !Array.isArray(entry.schedule.clients))
        throw new Error(`${file}: no schedule in this corpus file`);
      return { file, entry };
    });
}

export function reproduceCommand(s: Pick<Schedule, 'seed' | 'index' | 'storage' | 'cluster'>): string {
  if (s.cluster !== undefined)
    return `BIFRO_CHECK_SEED=${s.seed}:${s.index} BIFRO_CHECK_NODES=${s.cluster.nodes} BIFRO_CHECK_NATS=${s.cluster.natsServers} BIFRO_CHECK_MAX_FAULT_SECONDS=${s.cluster.maxFaultMs / 1000} npx jest test/e2e/53-cluster-delivery-checker.test.ts  (or: npm run check:delivery -- --cluster --nodes ${s.cluster.nodes} --nats ${s.cluster.natsServers} --max-fault-seconds ${s.cluster.maxFaultMs / 1000} --seed ${s.seed}:${s.index})`;
  return `BIFRO_CHECK_SEED=${s.seed}:${s.index} BIFRO_CHECK_STORAGE=${s.storage} npx jest test/e2e/49-delivery-checker.test.ts  (or: npm run check:delivery -- --seed ${s.seed}:${s.index} --storage ${s.storage})`;
}

/** Writes a failing schedule to the corpus; returns the file path. */
export function writeCorpusEntry(schedule: Schedule, problems: readonly Problem[], dir = CORPUS_DIR): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${schedule.storage}-${schedule.seed.toString(16)}-${schedule.index}.json`);
  const entry: CorpusEntry = {
    seed: schedule.seed,
    index: schedule.index,
    storage: schedule.storage,
    reproduce: reproduceCommand(schedule),
    found: new Date().toISOString(),
    summary: summarize(schedule),
    // The first problems, each with its first lines: enough to see what it was.
    problems: problems.slice(0, 10).map((p) => ({ ...p, details: p.details.slice(0, 40) })),
    schedule,
  };
  writeFileSync(file, `${JSON.stringify(entry, null, 2)}\n`);
  return file;
}
