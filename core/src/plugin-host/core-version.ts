import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The version of @bifro/core (from its package.json, two levels above this module in both src/ and dist/). */
export const CORE_VERSION: string = readCoreVersion();

function readCoreVersion(): string {
  try {
    const pkg = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : '0.0.0';
  } catch {
    return '0.0.0';
  }
}
