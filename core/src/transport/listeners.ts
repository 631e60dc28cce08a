import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { ConnectionOrigin } from '../protocol/connection';
import type { ListenerConfig } from '../runtime/config-types';
import { BifroError } from '../errors';

/** A listener after it bound: the real port when 0 was configured. */
export interface BoundListener {
  readonly name: string;
  readonly type: ListenerConfig['type'];
  readonly host: string;
  readonly port: number;
  close(): Promise<void>;
}

/** Called with each accepted byte stream and where it came from. */
export type AcceptHandler = (socket: Duplex, origin: ConnectionOrigin) => void;

/** Bind one listener. Rejects with BIFRO_LISTENER_BIND_FAILED naming the listener, address and cause. */
export async function bindListener(config: ListenerConfig, onAccept: AcceptHandler): Promise<BoundListener> {
  if (config.type !== 'tcp') {
    throw new BifroError('BIFRO_LISTENER_UNSUPPORTED', `listener "${config.name}": type ${config.type} is not available in this build`);
  }
  const server = net.createServer({ noDelay: true }, (socket) =>
    onAccept(socket, { listener: config.name, remoteAddress: socket.remoteAddress ?? '', remotePort: socket.remotePort ?? 0 }),
  );
  await new Promise<void>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      reject(
        new BifroError(
          'BIFRO_LISTENER_BIND_FAILED',
          `listener "${config.name}" cannot listen on ${config.host}:${config.port}: ${err.code ?? err.message}`,
          {
            listener: config.name,
          },
        ),
      );
    };
    server.once('error', onError);
    server.listen(config.port, config.host, () => {
      server.off('error', onError);
      resolve();
    });
  });
  const address = server.address() as net.AddressInfo;
  return {
    name: config.name,
    type: config.type,
    host: config.host,
    port: address.port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
