import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { SettingName, SettingUpdate } from '@bifro/spi';
import { Document, isAlias, isMap, isScalar, LineCounter, parseDocument, type Pair, type YAMLMap } from 'yaml';

/**
 * The text of a settings file with one tenant's overrides changed (a value sets it, `null`
 * removes it), edited through yaml's Document API so that comments, key order and the rest of the
 * layout stay where yaml can keep them: an existing value is changed in place (its line comment
 * stays), a new setting is added at the end of the tenant's section, a tenant without overrides
 * left is removed. `text` undefined: the file does not exist yet. Throws (naming the file and the
 * line) when the text is not a settings file this can edit safely: a YAML error, a top level or
 * `tenants:` that is not a mapping, a tenant section that is an alias.
 */
export function editSettingsText(text: string | undefined, file: string, tenantId: string, changes: SettingUpdate): string {
  const lineCounter = new LineCounter();
  const doc = text === undefined ? new Document({}) : parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const error = doc.errors[0];
  if (error !== undefined) {
    const pos = lineCounter.linePos(error.pos[0]);
    throw new Error(
      `settings-file: ${file} has a YAML error at line ${pos.line}, column ${pos.col} (${error.message}); fix the file before changing settings through the broker`,
    );
  }
  const entries = Object.entries(changes) as [SettingName, boolean | number | null | undefined][];
  const setting = entries.some(([, v]) => v !== null && v !== undefined);

  if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) doc.contents = doc.createNode({}) as never;
  const root = doc.contents;
  if (!isMap(root))
    throw new Error(`settings-file: the top level of ${file} is not a mapping; fix the file before changing settings through the broker`);

  let tenantsPair = findPair(root, 'tenants');
  if (tenantsPair === undefined) {
    if (!setting) return doc.toString({ lineWidth: 0 });
    tenantsPair = doc.createPair('tenants', {}) as Pair<unknown, unknown>;
    root.add(tenantsPair);
  }
  if (isAlias(tenantsPair.value)) throw new Error(`settings-file: tenants: in ${file} is an alias; edit the file by hand`);
  if (tenantsPair.value === null || (isScalar(tenantsPair.value) && tenantsPair.value.value === null))
    tenantsPair.value = doc.createNode({});
  const tenants = tenantsPair.value;
  if (!isMap(tenants))
    throw new Error(`settings-file: tenants: in ${file} is not a mapping; fix the file before changing settings through the broker`);

  let tenantPair = findPair(tenants, tenantId);
  if (tenantPair === undefined) {
    if (!setting) return doc.toString({ lineWidth: 0 });
    tenantPair = doc.createPair(tenantId, {}) as Pair<unknown, unknown>;
    tenants.add(tenantPair);
  }
  if (isAlias(tenantPair.value))
    throw new Error(`settings-file: the settings of tenant ${tenantId} in ${file} are an alias; edit the file by hand`);
  if (tenantPair.value === null || (isScalar(tenantPair.value) && tenantPair.value.value === null)) tenantPair.value = doc.createNode({});
  const overrides = tenantPair.value;
  if (!isMap(overrides))
    throw new Error(`settings-file: the settings of tenant ${tenantId} in ${file} are not a mapping; fix the file first`);

  for (const [name, value] of entries) {
    if (value === undefined) continue;
    const pair = findPair(overrides, name);
    if (value === null) {
      if (pair !== undefined) overrides.items.splice(overrides.items.indexOf(pair as never), 1);
    } else if (pair !== undefined && isScalar(pair.value)) {
      // In place: the value's line comment stays; a quoted (invalid) value becomes a plain one.
      pair.value.value = value;
      pair.value.type = 'PLAIN';
    } else if (pair !== undefined) {
      pair.value = doc.createNode(value);
    } else {
      overrides.add(doc.createPair(name, value));
    }
  }
  if (overrides.items.length === 0) tenants.items.splice(tenants.items.indexOf(tenantPair as never), 1);
  return doc.toString({ lineWidth: 0 });
}

/** The pair of a mapping whose key reads as `key` (a number key `123:` reads as `"123"`, as tenant ids do). */
function findPair(map: YAMLMap, key: string): Pair<unknown, unknown> | undefined {
  for (const pair of map.items) {
    const k = isScalar(pair.key) ? pair.key.value : pair.key;
    if ((typeof k === 'string' || typeof k === 'number' || typeof k === 'boolean') && String(k) === key)
      return pair as Pair<unknown, unknown>;
  }
  return undefined;
}

/**
 * Replaces `file` with `text` atomically: written to a temporary file in the same folder, synced,
 * then renamed over it (a reader sees the old text or the new one, never a part), the folder
 * synced where the platform allows. The file's permission bits are kept. `beforeRename` can cancel
 * at the last moment (the file changed meanwhile): the temporary file is removed and false returned.
 */
export async function writeFileAtomic(file: string, text: string, beforeRename?: () => Promise<boolean>): Promise<boolean> {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `.${path.basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  let mode = 0o644;
  try {
    mode = (await fs.promises.stat(file)).mode & 0o777;
  } catch {
    // A new file: the default mode.
  }
  try {
    const handle = await fs.promises.open(tmp, 'wx', mode);
    try {
      await handle.writeFile(text, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    if (beforeRename !== undefined && !(await beforeRename())) {
      await fs.promises.rm(tmp, { force: true });
      return false;
    }
    await fs.promises.rename(tmp, file);
  } catch (err) {
    await fs.promises.rm(tmp, { force: true });
    throw err;
  }
  try {
    const folder = await fs.promises.open(dir, 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
  } catch {
    // Not every platform can open or sync a folder; the rename is done either way.
  }
  return true;
}
