import { promises as fs } from 'node:fs';
import path from 'node:path';
import { BifroError } from '../base/errors';
import { DEFAULT_STORAGE_DIR as LEVEL_STORAGE_DIR } from '../plugin-host/defaults/default-storage';
import { exists } from './config';
import { TENANT_ASSIGNMENT } from '../workers/tenant-owner';

/**
 * `<dataDir>/workers.json`: the worker count a data directory was started with. Written by every
 * `bifro start` (also with one worker), checked before anything is loaded: a broker started with
 * another count would look for each tenant's sessions and retained messages in the wrong
 * worker's storage (`<dataDir>/worker-<i>/`).
 */
export const MARKER_FILE = 'workers.json';

interface Marker {
  readonly workers: number;
  readonly assignment: string;
}

/** The folder worker `index` keeps its data in (storage, plugin data). */
export function workerDataDir(dataDir: string, index: number): string {
  return path.join(dataDir, `worker-${index}`);
}

/**
 * Checks the data directory's recorded worker count against `workers` and records it when the
 * directory has none yet.
 * @throws BifroError BIFRO_WORKERS_COUNT_MISMATCH naming both counts, BIFRO_WORKERS_MARKER_INVALID.
 */
export async function checkWorkerCount(dataDir: string, workers: number): Promise<void> {
  const file = path.join(dataDir, MARKER_FILE);
  let text: string | undefined;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw invalid(file, (err as NodeJS.ErrnoException).code ?? String(err));
  }
  if (text === undefined) {
    // Written by a single process before this file existed: the default storage's folder is at the top.
    if (workers > 1 && (await exists(path.join(dataDir, LEVEL_STORAGE_DIR)))) {
      throw new BifroError(
        'BIFRO_WORKERS_COUNT_MISMATCH',
        `data directory ${dataDir} holds the storage of a single broker process (${LEVEL_STORAGE_DIR}/, no ${MARKER_FILE}), this start asks for workers: ${workers}; start with workers: 1 or use another data directory`,
        { dataDir, recorded: 1, requested: workers },
      );
    }
    await fs.mkdir(dataDir, { recursive: true, mode: 0o700 });
    const marker: Marker = { workers, assignment: TENANT_ASSIGNMENT };
    await fs.writeFile(file, `${JSON.stringify(marker)}\n`, { mode: 0o600 });
    return;
  }
  const recorded = parseMarker(text);
  if (recorded === undefined) throw invalid(file, 'expected {"workers": N}');
  if (recorded.workers !== workers || recorded.assignment !== TENANT_ASSIGNMENT) {
    const how = recorded.assignment !== TENANT_ASSIGNMENT ? ` (tenant assignment ${recorded.assignment})` : '';
    throw new BifroError(
      'BIFRO_WORKERS_COUNT_MISMATCH',
      `data directory ${dataDir} was used with workers: ${recorded.workers}${how}, this start asks for workers: ${workers} (recorded in ${file}); start with workers: ${recorded.workers} or use another data directory`,
      { dataDir, recorded: recorded.workers, requested: workers },
    );
  }
}

function parseMarker(text: string): Marker | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const { workers, assignment } = value as Record<string, unknown>;
  if (typeof workers !== 'number' || !Number.isInteger(workers) || workers < 1) return undefined;
  return { workers, assignment: typeof assignment === 'string' ? assignment : TENANT_ASSIGNMENT };
}

function invalid(file: string, reason: string): BifroError {
  return new BifroError('BIFRO_WORKERS_MARKER_INVALID', `cannot use ${file}: ${reason}`, { file });
}
