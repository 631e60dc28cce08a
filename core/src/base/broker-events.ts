import type { EventDetailValue, EventType } from '@bifro/spi';

/** Who an event is about: a ClientInfo, or what is known of the client. */
export type EventClient = { readonly tenantId: string; readonly clientId?: string; readonly userId?: string };

/** An event's detail, or a function building it (pass a function on hot paths). */
export type EventDetail = Readonly<Record<string, EventDetailValue>> | (() => Readonly<Record<string, EventDetailValue>>);

/** Report an event if some collector wants its type ({@link Engine.emit}); how the services report. */
export type EmitEvent = (type: EventType, client: EventClient | undefined, detail?: EventDetail) => void;
