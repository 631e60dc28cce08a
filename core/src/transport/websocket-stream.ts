import { Duplex } from 'node:stream';
import { WebSocket, type RawData } from 'ws';

/** WebSocket close code 1003: the endpoint received a type of data it cannot accept. */
export const WS_CLOSE_UNSUPPORTED_DATA = 1003;
/** WebSocket close code 1000: normal closure. */
const WS_CLOSE_NORMAL = 1000;

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

/**
 * A WebSocket seen as the byte stream MQTT expects. Binary messages are pushed as they come (an
 * MQTT packet may span messages, a message may hold several packets: the MQTT parser reassembles);
 * a text message closes the connection with 1003 [MQTT-6.0.0-1]. Writes queued while a send is in
 * flight go out together as one binary message (`_writev`), so a burst of packets costs one frame.
 * Back-pressure: a full read buffer pauses the WebSocket, reading resumes it.
 */
export class WebSocketStream extends Duplex {
  /** Set once a text frame arrived: nothing more is delivered. */
  private refused = false;

  constructor(private readonly ws: WebSocket) {
    super({ allowHalfOpen: false, decodeStrings: true });
    ws.on('message', (data: RawData, isBinary: boolean) => this.onMessage(data, isBinary));
    ws.on('close', () => this.push(null));
    ws.on('error', (err: Error) => this.destroy(err));
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.refused) return;
    if (!isBinary) {
      // MQTT control packets travel in binary frames only; anything else closes the connection [MQTT-6.0.0-1].
      this.refused = true;
      this.ws.close(WS_CLOSE_UNSUPPORTED_DATA, 'MQTT needs binary frames');
      this.push(null);
      return;
    }
    if (!this.push(toBuffer(data))) this.ws.pause();
  }

  override _read(): void {
    if (this.ws.isPaused) this.ws.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.send(chunk, callback);
  }

  override _writev(chunks: { chunk: Buffer; encoding: BufferEncoding }[], callback: (error?: Error | null) => void): void {
    this.send(chunks.length === 1 ? chunks[0]!.chunk : Buffer.concat(chunks.map((c) => c.chunk)), callback);
  }

  private send(data: Buffer, callback: (error?: Error | null) => void): void {
    if (this.ws.readyState !== WebSocket.OPEN) {
      callback(new Error('WebSocket is not open'));
      return;
    }
    this.ws.send(data, { binary: true, compress: false, fin: true }, (err?: Error) => callback(err ?? null));
  }

  override _final(callback: (error?: Error | null) => void): void {
    if (this.ws.readyState === WebSocket.OPEN) this.ws.close(WS_CLOSE_NORMAL);
    callback();
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    // A close handshake already under way finishes on its own (ws bounds it with a timer).
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.terminate();
    callback(error);
  }
}
