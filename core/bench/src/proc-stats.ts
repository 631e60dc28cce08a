/** Readings of another process from /proc (Linux); every function returns null elsewhere. */
import { readFileSync } from 'node:fs';

/** Resident set size of a process in bytes (VmRSS), or null when unreadable. */
export function readRssBytes(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]) * 1024;
  } catch {
    return null;
  }
}

/** CPU time (user + system) a process has used, in seconds, or null when unreadable. */
export function readCpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    if (!Number.isFinite(utime) || !Number.isFinite(stime)) return null;
    return (utime + stime) / CLOCK_TICKS;
  } catch {
    return null;
  }
}

/** USER_HZ: 100 on every mainstream Linux build. */
const CLOCK_TICKS = 100;

/** The soft limit on open files of a process, or null when unreadable. */
export function readOpenFileLimit(pid: number | 'self'): number | null {
  try {
    const m = /^Max open files\s+(\d+|unlimited)\s/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
    if (m === null) return null;
    return m[1] === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(m[1]);
  } catch {
    return null;
  }
}
