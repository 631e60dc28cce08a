/** A description of the machine a benchmark ran on. */
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  readonly cpus: number;
  readonly cpuModel: string;
  readonly node: string;
  readonly platform: string;
  readonly memoryGiB: number;
}

export function machineInfo(): MachineInfo {
  let model = os.cpus()[0]?.model ?? 'unknown';
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m !== null) model = m[1]!.trim();
  } catch {
    // not Linux: keep os.cpus()
  }
  return {
    cpus: os.availableParallelism(),
    cpuModel: model,
    node: process.version,
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    memoryGiB: Math.round((os.totalmem() / 1073741824) * 10) / 10,
  };
}
