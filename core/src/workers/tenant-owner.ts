/**
 * Which worker process owns a tenant when the broker runs `workers` > 1 (docs/multicore.md).
 * Every tenant lives in exactly one worker: its sessions, subscriptions, retained messages and
 * quotas. The assignment must never change for a data directory (the worker count is recorded
 * there, see worker-marker.ts), so the hash is fixed here and documented: FNV-1a, 32 bits, over
 * the UTF-8 bytes of the tenant id, modulo the worker count.
 */

/** Names the assignment in the data directory's marker; a different one would strand tenants. */
export const TENANT_ASSIGNMENT = 'fnv1a32-utf8-mod-workers';

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** FNV-1a (32 bits) of the UTF-8 bytes of `text`. */
export function fnv1a32(text: string): number {
  let hash = FNV_OFFSET;
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < bytes.length; i++) {
    hash ^= bytes[i]!;
    hash = Math.imul(hash, FNV_PRIME) >>> 0;
  }
  return hash >>> 0;
}

/** The index (0..workers-1) of the worker that owns `tenantId`. */
export function ownerOf(tenantId: string, workers: number): number {
  return workers <= 1 ? 0 : fnv1a32(tenantId) % workers;
}
