/**
 * Moving a TCP connection between processes without losing a byte. This leans on Node internals
 * that node:cluster itself relies on, kept in this one file:
 *
 * - `socket._handle`: the libuv TCP handle behind a net.Socket;
 * - `process.send(message, handle)` with a raw TCP handle (Node's `net.Native` handle type, which
 *   cluster's round-robin scheduler uses to pass accepted connections): the receiving process
 *   gets the raw handle, which nobody reads until it is wrapped; @types/node only lists the
 *   wrapped types, hence the one cast below;
 * - `new net.Socket({ handle })`, which is how Node wraps a received handle itself.
 *
 * A handle that is still reading in a process that sends it would race the next owner for the
 * bytes the client sends meanwhile, so the sender stops reading first and every hop passes the
 * raw handle, which no process reads until the owner wraps it.
 */
import net from 'node:net';

/** The libuv TCP handle of a socket (TCPWrap). */
export interface TcpHandle {
  readStop(): number;
  close(callback?: () => void): void;
  reading?: boolean;
}

export function isTcpHandle(value: unknown): value is TcpHandle {
  if (typeof value !== 'object' || value === null) return false;
  const h = value as Partial<Record<'readStop' | 'close', unknown>>;
  return typeof h.readStop === 'function' && typeof h.close === 'function';
}

/**
 * Takes the handle out of `socket`: reading stops (what the client sends next waits in the kernel
 * for the next owner) and the socket is left without a handle, so destroying it closes nothing.
 * Returns the handle and the bytes the socket had read but not yet emitted; undefined when it has no handle.
 */
export function detachHandle(socket: net.Socket): { handle: TcpHandle; buffered: Buffer[] } | undefined {
  const handle: unknown = Reflect.get(socket, '_handle');
  if (!isTcpHandle(handle)) return undefined;
  handle.readStop();
  handle.reading = false;
  Reflect.set(socket, '_handle', null);
  socket.pause();
  const buffered: Buffer[] = [];
  for (let chunk: unknown = socket.read(); chunk !== null; chunk = socket.read()) {
    if (Buffer.isBuffer(chunk)) buffered.push(chunk);
  }
  return { handle, buffered };
}

/** A readable, writable socket over a handle received from another process. */
export function wrapHandle(handle: TcpHandle): net.Socket {
  const options: net.SocketConstructorOpts & { readonly handle: TcpHandle } = { handle, readable: true, writable: true };
  return new net.Socket(options);
}

/** Node's IPC send as the cluster worker object (primary) or `process` (worker) offers it. */
export type IpcSend = (message: object, handle: net.Socket, options: undefined, callback: (error: Error | null) => void) => boolean;

type RawSend = (message: object, handle: TcpHandle, options: undefined, callback: (error: Error | null) => void) => boolean;

/**
 * Sends `message` with a raw TCP handle, then closes this process's copy of the handle once the
 * message (and with it the descriptor) has been written to the channel; `done` gets the error
 * when it could not be sent (the connection is then closed).
 */
export function sendHandle(send: IpcSend, message: object, handle: TcpHandle, done: (error: Error | null) => void): void {
  // The one cast: see the top of this file.
  const raw = send as unknown as RawSend;
  try {
    raw(message, handle, undefined, (error) => {
      handle.close();
      done(error);
    });
  } catch (err) {
    handle.close();
    done(err instanceof Error ? err : new Error(String(err)));
  }
}
