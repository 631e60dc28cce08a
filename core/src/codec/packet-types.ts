/** MQTT control packet types: the high four bits of the fixed header's first byte (§2.1.2). */
export const PACKET = {
  CONNECT: 1,
  CONNACK: 2,
  PUBLISH: 3,
  PUBACK: 4,
  PUBREC: 5,
  PUBREL: 6,
  PUBCOMP: 7,
  SUBSCRIBE: 8,
  SUBACK: 9,
  UNSUBSCRIBE: 10,
  UNSUBACK: 11,
  PINGREQ: 12,
  PINGRESP: 13,
  DISCONNECT: 14,
  AUTH: 15,
} as const;

/** The acknowledgements of the QoS 1 and 2 flows (§4.3): PUBACK, PUBREC, PUBREL, PUBCOMP. */
export type AckType = typeof PACKET.PUBACK | typeof PACKET.PUBREC | typeof PACKET.PUBREL | typeof PACKET.PUBCOMP;

/** The acknowledgement a PUBLISH of QoS 1 or 2 gets: PUBACK or PUBREC. */
export function ackTypeFor(qos: 1 | 2): typeof PACKET.PUBACK | typeof PACKET.PUBREC {
  return qos === 1 ? PACKET.PUBACK : PACKET.PUBREC;
}
