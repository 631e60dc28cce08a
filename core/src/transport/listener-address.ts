/** A listener as it is bound. */
export interface ListenerAddress {
  readonly name: string;
  readonly type: string;
  readonly host: string;
  readonly port: number;
}
