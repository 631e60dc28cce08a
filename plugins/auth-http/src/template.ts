import type { AuthRequest, ClientCertificate } from '@bifro/spi';

/**
 * The placeholders a template may use, each with how its value is read from the CONNECT. A value
 * that is absent (no username, no certificate...) renders as the empty string.
 */
export const PLACEHOLDERS = {
  clientId: (r: AuthRequest) => r.clientId,
  username: (r: AuthRequest) => r.username ?? '',
  /** The password as UTF-8 text (invalid sequences become U+FFFD: use passwordBase64 for binary passwords). */
  password: (r: AuthRequest) =>
    r.password === undefined ? '' : Buffer.from(r.password.buffer, r.password.byteOffset, r.password.byteLength).toString('utf8'),
  /** The password bytes, base64. */
  passwordBase64: (r: AuthRequest) =>
    r.password === undefined ? '' : Buffer.from(r.password.buffer, r.password.byteOffset, r.password.byteLength).toString('base64'),
  /** `base64(username ":" password)`, for `Authorization: Basic {basicAuth}`. */
  basicAuth: (r: AuthRequest) =>
    Buffer.concat([
      Buffer.from(`${r.username ?? ''}:`, 'utf8'),
      r.password === undefined ? Buffer.alloc(0) : Buffer.from(r.password.buffer, r.password.byteOffset, r.password.byteLength),
    ]).toString('base64'),
  remoteAddress: (r: AuthRequest) => r.remoteAddress,
  remotePort: (r: AuthRequest) => String(r.remotePort),
  listener: (r: AuthRequest) => r.listener,
  protocolVersion: (r: AuthRequest) => String(r.protocolVersion),
  certCN: (r: AuthRequest) => r.clientCertificate?.subject.CN ?? '',
  certSubject: (r: AuthRequest) => dn(r.clientCertificate?.subject),
  certIssuer: (r: AuthRequest) => dn(r.clientCertificate?.issuer),
  certFingerprint: (r: AuthRequest) => r.clientCertificate?.fingerprint256 ?? '',
  certSerial: (r: AuthRequest) => r.clientCertificate?.serialNumber ?? '',
  /** `true` when the client presented a certificate that chained to the listener's CA, else `false`. */
  certVerified: (r: AuthRequest) => String(r.clientCertificate?.authorized === true),
} as const satisfies Readonly<Record<string, (r: AuthRequest) => string>>;

export type PlaceholderName = keyof typeof PLACEHOLDERS;

const NAMES = Object.keys(PLACEHOLDERS) as PlaceholderName[];

function isPlaceholder(name: string): name is PlaceholderName {
  return Object.prototype.hasOwnProperty.call(PLACEHOLDERS, name);
}

function dn(fields: ClientCertificate['subject'] | undefined): string {
  if (fields === undefined) return '';
  return Object.entries(fields)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}

/**
 * How a value is escaped where it lands:
 * - `url`: percent-encoded as a URI component (`encodeURIComponent`), so it stays inside its
 *   path segment or query value;
 * - `header`: printable ASCII is kept, `%` and every other character (CR, LF, control
 *   characters, non-ASCII) is percent-encoded as UTF-8, so a value can never end the header or
 *   add one;
 * - `text`: as is (JSON and form bodies escape the whole value themselves).
 */
export type Escaping = 'url' | 'header' | 'text';

/** A parsed template: literal text and placeholders, in order. */
export interface Template {
  readonly source: string;
  /** Literal text (strings) and placeholders (`{ name }`). */
  readonly parts: ReadonlyArray<string | { readonly name: PlaceholderName }>;
  /** The placeholders it uses. */
  readonly uses: ReadonlySet<PlaceholderName>;
}

/**
 * Parses a template: `{name}` is a placeholder (one of {@link PLACEHOLDERS}), `{{` and `}}` are a
 * literal `{` and `}`. Throws an Error (its message says what, at which position) for an unknown
 * placeholder, an unclosed `{` or a lone `}`.
 */
export function parseTemplate(source: string): Template {
  const parts: (string | { readonly name: PlaceholderName })[] = [];
  const uses = new Set<PlaceholderName>();
  let text = '';
  for (let i = 0; i < source.length; i++) {
    const ch = source[i];
    if (ch === '{') {
      if (source[i + 1] === '{') {
        text += '{';
        i++;
        continue;
      }
      const close = source.indexOf('}', i + 1);
      if (close === -1) throw new Error(`"{" at position ${i} is not closed (write "{{" for a literal "{")`);
      const name = source.slice(i + 1, close);
      if (!isPlaceholder(name)) throw new Error(`unknown placeholder {${name}} (known: ${NAMES.map((n) => `{${n}}`).join(', ')})`);
      if (text !== '') parts.push(text);
      text = '';
      parts.push({ name });
      uses.add(name);
      i = close;
    } else if (ch === '}') {
      if (source[i + 1] !== '}') throw new Error(`lone "}" at position ${i} (write "}}" for a literal "}")`);
      text += '}';
      i++;
    } else {
      text += ch;
    }
  }
  if (text !== '') parts.push(text);
  return { source, parts, uses };
}

/** Percent-encodes `%` and every character outside printable ASCII (0x20-0x7E), as UTF-8. */
export function escapeHeaderValue(value: string): string {
  // Fast path: most values need nothing.
  let clean = true;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x25) {
      clean = false;
      break;
    }
  }
  if (clean) return value;
  let out = '';
  for (const ch of value) {
    const c = ch.codePointAt(0)!;
    if (c >= 0x20 && c <= 0x7e && c !== 0x25) out += ch;
    else for (const byte of Buffer.from(ch, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function escape(value: string, escaping: Escaping): string {
  switch (escaping) {
    case 'url':
      return encodeURIComponent(value);
    case 'header':
      return escapeHeaderValue(value);
    case 'text':
      return value;
  }
}

/** The values of the placeholders for one CONNECT, each read once when first used. */
export class TemplateValues {
  private readonly values = new Map<PlaceholderName, string>();

  constructor(private readonly request: AuthRequest) {}

  get(name: PlaceholderName): string {
    let value = this.values.get(name);
    if (value === undefined) {
      value = PLACEHOLDERS[name](this.request);
      this.values.set(name, value);
    }
    return value;
  }
}

/** Renders a template with the values of one CONNECT, each value escaped for where it lands. */
export function renderTemplate(template: Template, values: TemplateValues, escaping: Escaping): string {
  let out = '';
  for (const part of template.parts) out += typeof part === 'string' ? part : escape(values.get(part.name), escaping);
  return out;
}
