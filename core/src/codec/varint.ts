/** Size in bytes of a variable byte integer [MQTT-1.5.5]. */
export function varintSize(value: number): number {
  return value < 128 ? 1 : value < 16384 ? 2 : value < 2097152 ? 3 : 4;
}

/** Write a variable byte integer at `pos`; returns the position after it. */
export function writeVarint(buf: Buffer, pos: number, value: number): number {
  do {
    let byte = value % 128;
    value = Math.floor(value / 128);
    if (value > 0) byte |= 0x80;
    buf[pos++] = byte;
  } while (value > 0);
  return pos;
}

/**
 * Read a variable byte integer at `pos`: [value, next position], or undefined when malformed
 * (more than four bytes, or more bytes than the value needs [MQTT-1.5.5-1]) or truncated.
 */
export function readVarint(buf: Buffer, pos: number, end: number): [number, number] | undefined {
  let value = 0;
  let multiplier = 1;
  for (let n = 0; n < 4; n++) {
    if (pos >= end) return undefined;
    const byte = buf[pos++]!;
    value += (byte & 0x7f) * multiplier;
    if ((byte & 0x80) === 0) return byte === 0 && n > 0 ? undefined : [value, pos];
    multiplier *= 128;
  }
  return undefined;
}
