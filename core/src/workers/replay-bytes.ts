/** What a worker replays of a connection it hands over (see handover.ts). */

/**
 * The bytes the owner replays: the CONNECT frame, then what followed the AUTH frames of an
 * enhanced authentication exchange (those were consumed here; the owner gets their outcome).
 * A partial frame at the end is kept: the rest of it is still in the socket.
 */
export function replayBytes(bytes: Buffer): Buffer {
  const connectEnd = frameEnd(bytes, 0);
  if (connectEnd === undefined) return bytes;
  let pos = connectEnd;
  while (pos < bytes.length && bytes[pos]! >> 4 === 15) {
    const end = frameEnd(bytes, pos);
    if (end === undefined) break;
    pos = end;
  }
  return pos === connectEnd ? bytes : Buffer.concat([bytes.subarray(0, connectEnd), bytes.subarray(pos)]);
}

/** Where the MQTT frame starting at `pos` ends, or undefined when it is not complete. */
function frameEnd(bytes: Buffer, pos: number): number | undefined {
  let remaining = 0;
  let multiplier = 1;
  for (let i = pos + 1; i < bytes.length && i < pos + 5; i++) {
    const byte = bytes[i]!;
    remaining += (byte & 0x7f) * multiplier;
    multiplier *= 128;
    if ((byte & 0x80) === 0) {
      const end = i + 1 + remaining;
      return end <= bytes.length ? end : undefined;
    }
  }
  return undefined;
}
