import { encodeToken, sessionPartition, tenantPartition } from './key-codec';

/**
 * Where everything lives (docs/storage-nats.md): per partition p, a sessions bucket, an inbox
 * stream, an inflight bucket and a retained bucket; one bans bucket and one meta bucket.
 */
export class Layout {
  constructor(
    readonly prefix: string,
    readonly partitions: number,
  ) {}

  sessionsBucket(p: number): string {
    return `${this.prefix}_sess_${p}`;
  }

  inflightBucket(p: number): string {
    return `${this.prefix}_infl_${p}`;
  }

  retainedBucket(p: number): string {
    return `${this.prefix}_ret_${p}`;
  }

  inboxStream(p: number): string {
    return `${this.prefix.toUpperCase()}_INBOX_${p}`;
  }

  inboxSubjects(p: number): string {
    return `${this.prefix}.inbox.${p}.>`;
  }

  inboxSubject(p: number, tenantId: string, clientId: string): string {
    return `${this.prefix}.inbox.${p}.${sessionKey(tenantId, clientId)}`;
  }

  get bansBucket(): string {
    return `${this.prefix}_bans`;
  }

  get metaBucket(): string {
    return `${this.prefix}_meta`;
  }

  sessionPartition(tenantId: string, clientId: string): number {
    return sessionPartition(tenantId, clientId, this.partitions);
  }

  tenantPartition(tenantId: string): number {
    return tenantPartition(tenantId, this.partitions);
  }
}

/** `<enc tenant>.<enc client>`: the key of a session in every bucket and its inbox subject's tail. */
export function sessionKey(tenantId: string, clientId: string): string {
  return `${encodeToken(tenantId)}.${encodeToken(clientId)}`;
}
