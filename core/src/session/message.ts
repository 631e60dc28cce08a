import type { QoS } from '@bifro/spi';
import { encodePublish, type EncodableMessage, type PublishProperties } from '../codec/publish-codec';

/** An encoded PUBLISH shared by every subscriber of one variant; QoS 1/2 copies get their packet id patched in. */
export interface EncodedPublish {
  readonly buf: Buffer;
  readonly packetIdOffset: number;
}

/**
 * An application message inside the broker: what was published, plus the encodings made so far.
 * Encoded once per variant (protocol family × QoS × RETAIN) and shared by every subscriber of
 * that variant (docs/architecture.md § Data path); variants with per-subscriber properties (subscription ids, topic
 * alias, message expiry) are encoded per delivery.
 */
export class Message implements EncodableMessage {
  private encodings: (EncodedPublish | undefined)[] | undefined;

  constructor(
    readonly topic: string,
    readonly payload: Buffer,
    readonly qos: QoS,
    readonly retain: boolean,
    readonly properties: PublishProperties | undefined,
    /** Milliseconds since the epoch. */
    readonly publishedAt: number,
    /** When it expires (ms since epoch), 0 = never. */
    readonly expiresAt: number,
    /** Client id of the publisher (for No Local; a will keeps its client's id). */
    readonly publisherClientId: string,
  ) {}

  /** Whether the message has expired at `now` [MQTT-3.3.2-5]. */
  expired(now: number): boolean {
    return this.expiresAt !== 0 && now > this.expiresAt;
  }

  /** Remaining expiry interval in whole seconds to forward [MQTT-3.3.2-6], undefined when none. */
  remainingExpiry(now: number): number | undefined {
    if (this.expiresAt === 0) return undefined;
    return Math.max(0, Math.ceil((this.expiresAt - now) / 1000));
  }

  /** The shared encoding for a variant without per-subscriber properties. */
  encoded(v5: boolean, qos: QoS, retain: boolean): EncodedPublish {
    const slot = (v5 ? 6 : 0) + qos * 2 + (retain ? 1 : 0);
    const cache = (this.encodings ??= new Array<EncodedPublish | undefined>(12));
    let hit = cache[slot];
    if (hit === undefined) {
      hit = encodePublish(this, { qos, retain, dup: false, packetId: 0, v5 });
      cache[slot] = hit;
    }
    return hit;
  }

  /** Use `encoding` (the PUBLISH as received, {@link receivedEncoding}) for its variant. */
  adoptEncoding(v5: boolean, qos: QoS, retain: boolean, encoding: EncodedPublish): void {
    (this.encodings ??= new Array<EncodedPublish | undefined>(12))[(v5 ? 6 : 0) + qos * 2 + (retain ? 1 : 0)] = encoding;
  }

  /** Payload and topic bytes, for quotas and metrics. */
  get size(): number {
    return this.payload.length + this.topic.length;
  }
}
