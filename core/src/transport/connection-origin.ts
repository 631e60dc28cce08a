import type { ClientCertificate } from '@bifro/spi';

/** Where a connection came from, as the transport established it. */
export interface ConnectionOrigin {
  readonly listener: string;
  /** The client's address (from the PROXY protocol header when the listener accepts it). */
  readonly remoteAddress: string;
  readonly remotePort: number;
  /** The TLS client certificate, on TLS/WSS listeners that request one and got one. */
  readonly clientCertificate?: ClientCertificate;
}
