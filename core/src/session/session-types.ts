/**
 * The values a session trades with the broker and its connection, without the `Session`
 * class itself: deliveries, the publisher's write waiter, the connection link, the will and the
 * queue policy. Files that only need these (persistence, the queue) import them from here.
 */
import type { QoS } from '@bifro/spi';
import type { Message } from './message';

/** One message on its way to one session, at the QoS and RETAIN flag of that delivery. */
export interface Delivery {
  readonly msg: Message;
  readonly qos: QoS;
  readonly retain: boolean;
  /** v5 Subscription Identifiers of the matching subscriptions. */
  readonly subscriptionIds: readonly number[] | undefined;
}

/**
 * What waits for the storage writes one inbound PUBLISH causes (the publisher's acknowledgement):
 * each write holds it and releases or fails it when done. A counter, not a promise per write,
 * keeps the persistent QoS 1 path to one object per message.
 */
/** How long after a failed storage write a session tries it again. */
export const STORE_RETRY_MS = 1000;

export interface WriteWaiter {
  hold(): void;
  release(): void;
  fail(err: unknown): void;
  /** Hold until `write` settles; a failed write is also told to `reporter` (a session's storage call, as `call`). */
  add(write: Promise<unknown>, reporter?: WriteReporter, call?: string): void;
}

/** Who is told that a write a waiter held failed (a session: its storage failures are logged and counted). */
export interface WriteReporter {
  writeFailed(call: string, err: unknown): void;
}

/** What a session needs of the connection that currently serves it. */
export interface SessionLink {
  /** MQTT 3.1/3.1.1 connections may resend unacknowledged messages while connected; MQTT 5 must not [MQTT-4.4.0-1]. */
  readonly v5: boolean;
  /** The client's Receive Maximum: most unacknowledged QoS 1/2 PUBLISH it accepts [MQTT-3.3.4-9]. */
  readonly receiveMaximum: number;
  /** false while the socket's write buffer is over its high-water mark. */
  writable(): boolean;
  /** Bytes waiting in the socket's write buffer. */
  bufferedBytes(): number;
  /** Most bytes that may wait in memory for this connection: its session queue plus {@link bufferedBytes} (mqtt.maxQueuedBytesPerConnection). */
  readonly maxQueuedBytes: number;
  /** Write a PUBLISH. Returns false when it was dropped (larger than the client's Maximum Packet Size). */
  sendPublish(delivery: Delivery, packetId: number, dup: boolean): boolean;
  sendPubrel(packetId: number): void;
  /** The session's queue overflowed while this connection served it (MinSendPerSec). */
  queueOverflowed(): void;
}

/** The will of a session: published on abnormal disconnect, after its delay [MQTT-3.1.2-8], [MQTT-3.1.3-9]. */
export interface SessionWill {
  readonly message: Message;
  readonly delaySeconds: number;
}

export type { QueueLimit } from '../tenancy/tenant-limits';

/**
 * Why a delivery was dropped. `queue-bytes`: the connection's queue plus socket buffer would pass
 * mqtt.maxQueuedBytesPerConnection; `tenant-queue-bytes`: the tenant's queues would pass MaxTenantQueuedBytes.
 */
export type DropReason = 'queue-full' | 'queue-bytes' | 'tenant-queue-bytes' | 'expired' | 'too-large' | 'quota' | 'resends-exhausted';
