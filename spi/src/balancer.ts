import type { ClientInfo, Lifecycle, MaybePromise } from './common';

/** Keep the client here. */
export interface NoRedirect {
  readonly type: 'none';
}

/** Send the client elsewhere: v5 CONNACK/DISCONNECT 0x9C (use another server) or 0x9D (server moved) with Server Reference. */
export interface Redirect {
  readonly type: 'redirect';
  /** true: 0x9D server moved; false: 0x9C use another server. */
  readonly permanent: boolean;
  /** The Server Reference, e.g. `mqtt-2.example.com:1883`. */
  readonly serverReference: string;
}

export type RedirectDecision = NoRedirect | Redirect;

/**
 * Decides whether a client should connect to another server. Asked at CONNECT. MQTT 3 clients cannot be redirected:
 * a redirect at CONNECT refuses them with 0x03 (server unavailable).
 *
 * @example
 * ```ts
 * const balancer: ClientBalancer = {
 *   needRedirect: (client) =>
 *     client.tenantId === 'moved' ? { type: 'redirect', permanent: true, serverReference: 'eu.example.com' } : { type: 'none' },
 * };
 * ```
 */
export interface ClientBalancer extends Lifecycle {
  needRedirect(client: ClientInfo): MaybePromise<RedirectDecision>;
}
