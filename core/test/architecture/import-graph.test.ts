import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * The shape of `core/src` as its imports draw it: no circle between files, of value imports or
 * even counting `import type` (a circle through every handler, the connection, the engine and the
 * listeners is how a change to one room ends up in all of them).
 * Run alone: `npx jest core/test/architecture`.
 */

const SRC = path.resolve(__dirname, '..', '..', 'src');

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (p.endsWith('.ts') && !p.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

const IMPORT = /^\s*(?:import|export)\s+(type\s+)?([^'";]*?)\s*from\s*['"]([^'"]+)['"]/gms;

/** Whether an import clause brings in types only: `import type ...` or `import { type A, type B }`. */
function typeOnly(typeKeyword: string | undefined, clause: string): boolean {
  if (typeKeyword !== undefined) return true;
  const c = clause.trim();
  if (!c.startsWith('{') || !c.endsWith('}')) return false;
  const names = c
    .slice(1, -1)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  return names.length > 0 && names.every((s) => s.startsWith('type '));
}

function resolveImport(from: string, spec: string): string | undefined {
  if (!spec.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(from), spec);
  return [`${base}.ts`, path.join(base, 'index.ts')].find((c) => existsSync(c));
}

/** file → the files it imports (value imports only, or all). */
function importGraph(withTypes: boolean): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(SRC)) {
    const deps = new Set<string>();
    const src = readFileSync(file, 'utf8');
    for (const m of src.matchAll(IMPORT)) {
      if (!withTypes && typeOnly(m[1], m[2]!)) continue;
      const target = resolveImport(file, m[3]!);
      if (target !== undefined) deps.add(target);
    }
    graph.set(file, [...deps]);
  }
  return graph;
}

/** Strongly connected components of more than one file (Tarjan), as paths relative to src/. */
function circles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const stack: string[] = [];
  const onStack = new Set<string>();
  const idx = new Map<string, number>();
  const low = new Map<string, number>();
  const out: string[][] = [];
  const visit = (v: string): void => {
    idx.set(v, index);
    low.set(v, index);
    index++;
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, idx.get(w)!));
    }
    if (low.get(v) === idx.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(path.relative(SRC, w));
      } while (w !== v);
      if (scc.length > 1) out.push(scc.sort());
    }
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return out;
}

/**
 * The same imports drawn between rooms: each top-level folder of src/ is one node, a file at the
 * top of src/ (the package entry) its own node.
 */
function folderGraph(): Map<string, string[]> {
  const room = (file: string): string => path.relative(SRC, file).split(path.sep)[0]!;
  const graph = new Map<string, string[]>();
  for (const [file, deps] of importGraph(true)) {
    const from = room(file);
    const out = graph.get(from) ?? [];
    for (const d of deps) if (room(d) !== from && !out.includes(room(d))) out.push(room(d));
    graph.set(from, out);
  }
  return graph;
}

describe('core/src import graph', () => {
  it('has no circle of value imports', () => {
    expect(circles(importGraph(false))).toEqual([]);
  });

  it('has no circle even counting type-only imports', () => {
    expect(circles(importGraph(true))).toEqual([]);
  });

  it('has no circle between folders (runtime/ at the top, base/ and codec/ at the bottom)', () => {
    const graph = folderGraph();
    expect(circles(new Map([...graph].map(([k, v]) => [path.join(SRC, k), v.map((d) => path.join(SRC, d))])))).toEqual([]);
    // Leaves import no other room of core; the composition root is imported by no room but the CLI and the package entry.
    expect(graph.get('base')).toEqual([]);
    expect((graph.get('codec') ?? []).filter((d) => d !== 'base' && d !== 'routing')).toEqual([]);
    const intoRuntime = [...graph].filter(([, v]) => v.includes('runtime')).map(([k]) => k);
    expect(intoRuntime.sort()).toEqual(['cli', 'index.ts']);
  });

  it('keeps NATS inside cluster/, and cluster/ on base/ and the pure topic helpers of routing/ (a standalone broker never loads it)', () => {
    const natsImporters = sourceFiles(SRC).filter((f) => /from\s+['"]nats['"]|require\(['"]nats['"]\)/.test(readFileSync(f, 'utf8')));
    expect(natsImporters.every((f) => path.relative(SRC, f).startsWith(`cluster${path.sep}`))).toBe(true);
    expect(natsImporters.length).toBeGreaterThan(0);
    expect(folderGraph().get('cluster')).toEqual(['base', 'routing']);
    // Outside cluster/, only its type-only view is imported; the rest is required when `cluster` is configured.
    const reachIn = [...importGraph(true)]
      .filter(([file]) => !path.relative(SRC, file).startsWith(`cluster${path.sep}`))
      .flatMap(([, deps]) => deps.map((d) => path.relative(SRC, d)))
      .filter((d) => d.startsWith(`cluster${path.sep}`));
    expect([...new Set(reachIn)]).toEqual([path.join('cluster', 'cluster-view.ts')]);
    const viewSource = readFileSync(path.join(SRC, 'cluster', 'cluster-view.ts'), 'utf8');
    expect(viewSource).not.toMatch(/^\s*import\s/m);
  });

  it('imports no plugin package', () => {
    const offenders = sourceFiles(SRC).filter((f) => /from\s+['"]@bifro\/plugin-/.test(readFileSync(f, 'utf8')));
    expect(offenders.map((f) => path.relative(SRC, f))).toEqual([]);
  });

  it('sees the imports it checks (the analysis itself is not blind)', () => {
    const graph = importGraph(true);
    const connection = graph.get(path.join(SRC, 'protocol', 'connection.ts')) ?? [];
    expect(connection.length).toBeGreaterThan(3);
  });
});
