import pino, { type Logger, type LoggerOptions } from 'pino';
import type { PluginLogger } from '@bifro/spi';

export type { Logger } from 'pino';

export interface LoggerSettings {
  readonly level: string;
  /** Human-readable output; defaults to whether stdout is a TTY. */
  readonly pretty?: boolean;
}

/** The broker logger: JSON lines, or pino-pretty when stdout is a terminal. */
export function createLogger(settings: LoggerSettings, destination?: pino.DestinationStream): Logger {
  const options: LoggerOptions = { level: settings.level, base: { pid: process.pid } };
  if (destination) return pino(options, destination);
  const pretty = settings.pretty ?? Boolean(process.stdout.isTTY);
  if (pretty) {
    return pino({ ...options, transport: { target: 'pino-pretty', options: { colorize: true, ignore: 'pid,hostname' } } });
  }
  return pino(options);
}

/** Adapts a pino logger to the plugin-facing logger shape (message first, fields second). */
export function toPluginLogger(logger: Logger): PluginLogger {
  return {
    trace: (msg, fields) => logger.trace(fields ?? {}, msg),
    debug: (msg, fields) => logger.debug(fields ?? {}, msg),
    info: (msg, fields) => logger.info(fields ?? {}, msg),
    warn: (msg, fields) => logger.warn(fields ?? {}, msg),
    error: (msg, fields) => logger.error(fields ?? {}, msg),
  };
}
