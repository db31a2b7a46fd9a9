// The codecs records and state cross the boundary in: UTF-8 JSON at a job's
// edges, MessagePack between components and in state. The encodings are the
// Rust and Python SDKs': a value written in one language reads the same in
// another. Integers (up to 2^53) take their shortest MessagePack form, other
// numbers are 64-bit floats, maps keep their keys as strings.

export const JSON_CODEC = 'json';
export const MSGPACK = 'msgpack';

/** A value that cannot be encoded, or bytes that are not a value. */
export class CodecError extends Error {
  constructor(message) {
    super(message);
    this.name = 'CodecError';
  }
}

const hasText = typeof TextEncoder === 'function' && typeof TextDecoder === 'function';
const textEncoder = hasText ? new TextEncoder() : null;
const textDecoder = hasText ? new TextDecoder('utf-8', { fatal: true }) : null;

/** The UTF-8 bytes of a string. */
export function utf8Encode(s) {
  if (textEncoder) return textEncoder.encode(s);
  const out = new Uint8Array(s.length * 3);
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i);
    if (c < 0x80) {
      out[n++] = c;
      continue;
    }
    if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d < 0xe000) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      }
    }
    if (c >= 0xd800 && c < 0xe000) c = 0xfffd;
    if (c < 0x800) {
      out[n++] = 0xc0 | (c >> 6);
      out[n++] = 0x80 | (c & 63);
    } else if (c < 0x10000) {
      out[n++] = 0xe0 | (c >> 12);
      out[n++] = 0x80 | ((c >> 6) & 63);
      out[n++] = 0x80 | (c & 63);
    } else {
      out[n++] = 0xf0 | (c >> 18);
      out[n++] = 0x80 | ((c >> 12) & 63);
      out[n++] = 0x80 | ((c >> 6) & 63);
      out[n++] = 0x80 | (c & 63);
    }
  }
  return out.subarray(0, n);
}

/** The string of UTF-8 bytes `bytes[start..end)`; invalid UTF-8 is an error. */
export function utf8Decode(bytes, start = 0, end = bytes.length) {
  if (textDecoder) {
    try {
      return textDecoder.decode(bytes.subarray(start, end));
    } catch (e) {
      throw new CodecError('a string is not UTF-8');
    }
  }
  let s = '';
  let chunk = [];
  let i = start;
  while (i < end) {
    const b = bytes[i];
    let c;
    if (b < 0x80) {
      c = b;
      i += 1;
    } else if (b >= 0xc2 && b < 0xe0 && i + 1 < end && (bytes[i + 1] & 0xc0) === 0x80) {
      c = ((b & 31) << 6) | (bytes[i + 1] & 63);
      i += 2;
    } else if (b >= 0xe0 && b < 0xf0 && i + 2 < end && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80) {
      c = ((b & 15) << 12) | ((bytes[i + 1] & 63) << 6) | (bytes[i + 2] & 63);
      if (c < 0x800 || (c >= 0xd800 && c < 0xe000)) throw new CodecError('a string is not UTF-8');
      i += 3;
    } else if (b >= 0xf0 && b < 0xf5 && i + 3 < end && (bytes[i + 1] & 0xc0) === 0x80 && (bytes[i + 2] & 0xc0) === 0x80 && (bytes[i + 3] & 0xc0) === 0x80) {
      c = ((b & 7) << 18) | ((bytes[i + 1] & 63) << 12) | ((bytes[i + 2] & 63) << 6) | (bytes[i + 3] & 63);
      if (c < 0x10000 || c > 0x10ffff) throw new CodecError('a string is not UTF-8');
      i += 4;
    } else {
      throw new CodecError('a string is not UTF-8');
    }
    if (c >= 0x10000) {
      c -= 0x10000;
      chunk.push(0xd800 + (c >> 10), 0xdc00 + (c & 1023));
    } else {
      chunk.push(c);
    }
    if (chunk.length >= 4096) {
      s += String.fromCharCode.apply(null, chunk);
      chunk = [];
    }
  }
  return s + String.fromCharCode.apply(null, chunk);
}

/** A value as a short text for an error message. */
export function shown(value) {
  let text;
  try {
    text = typeof value === 'bigint' ? String(value) : JSON.stringify(value);
  } catch (e) {
    try {
      text = stringifyBig(value);
    } catch (e2) {
      text = String(value);
    }
  }
  if (text === undefined) text = String(value);
  return text.length <= 80 ? text : text.slice(0, 77) + '...';
}

/** Whether `value` needs the exact writer: it holds a BigInt, or a whole
 * number beyond 2^53 − 1 (written in exponent form, so that it reads back as
 * the number it is, not as a BigInt). Throws on what JSON cannot hold. */
function checkJson(value) {
  // JSON.stringify writes NaN as null and drops undefined and functions:
  // refuse them instead of losing data.
  const t = typeof value;
  if (t === 'number') {
    if (!Number.isFinite(value)) throw new CodecError(`cannot encode ${value} as JSON`);
    return Math.abs(value) > Number.MAX_SAFE_INTEGER && Number.isInteger(value);
  } else if (t === 'bigint') {
    return true;
  } else if (t === 'undefined' || t === 'function' || t === 'symbol') {
    throw new CodecError(`cannot encode a ${t} as JSON`);
  } else if (value !== null && t === 'object') {
    if (value instanceof Uint8Array) throw new CodecError('cannot encode bytes as JSON');
    // What writes itself (a Date) is JSON.stringify's; a boxed value is its value.
    if (typeof value.toJSON === 'function') return false;
    if (isBoxed(value)) return checkJson(value.valueOf());
    const items = Array.isArray(value) ? value : Object.values(value);
    let exact = false;
    for (const v of items) exact = checkJson(v) || exact;
    return exact;
  }
  return false;
}

const isBoxed = (v) => v instanceof Number || v instanceof String || v instanceof Boolean || v instanceof BigInt;

/** JSON text of a checked value holding BigInts or large whole numbers. */
function stringifyBig(value) {
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'number' && Math.abs(value) > Number.MAX_SAFE_INTEGER) return value.toExponential();
  if (value === null || typeof value !== 'object' || typeof value.toJSON === 'function') return JSON.stringify(value);
  if (isBoxed(value)) return stringifyBig(value.valueOf());
  if (Array.isArray(value)) return '[' + value.map(stringifyBig).join(',') + ']';
  const parts = Object.keys(value).map((k) => JSON.stringify(k) + ':' + stringifyBig(value[k]));
  return '{' + parts.join(',') + '}';
}

/** JSON text as a value. Integers beyond 2^53 − 1 in magnitude, which a
 * number cannot hold exactly, are BigInts (within 64 bits; larger ones are
 * numbers, as floats are). */
export function parseJson(text) {
  // An integer needs 16 digits or more to pass 2^53: text without such an
  // integer (digits not after a point, nor before one or an exponent) is
  // parsed natively.
  if (!LONG_INTEGER.test(text)) return JSON.parse(text);
  const p = new JsonParser(text);
  const v = p.value();
  p.space();
  if (p.i !== text.length) p.fail('unexpected text after the value');
  return v;
}

const LONG_INTEGER = /(?:^|[^.\d])-?\d{16,}(?![.\deE])/;
const WORDS = [['true', true], ['false', false], ['null', null]];
const I64_MIN = -(2n ** 63n);
const U64_MAX = 2n ** 64n - 1n;
const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;

class JsonParser {
  constructor(text) {
    this.text = text;
    this.i = 0;
  }
  fail(what) {
    throw new SyntaxError(`${what} at position ${this.i}`);
  }
  space() {
    const t = this.text;
    while (this.i < t.length && ' \t\n\r'.includes(t[this.i])) this.i++;
  }
  value() {
    this.space();
    const t = this.text;
    const c = t[this.i];
    if (c === '{') {
      this.i++;
      const obj = {};
      this.space();
      if (t[this.i] === '}') {
        this.i++;
        return obj;
      }
      for (;;) {
        this.space();
        if (t[this.i] !== '"') this.fail('expected a string key');
        const key = this.string();
        this.space();
        if (t[this.i++] !== ':') this.fail("expected ':'");
        // As JSON.parse: `__proto__` is a key like any other.
        Object.defineProperty(obj, key, { value: this.value(), writable: true, enumerable: true, configurable: true });
        this.space();
        const next = t[this.i++];
        if (next === '}') return obj;
        if (next !== ',') this.fail("expected ',' or '}'");
      }
    }
    if (c === '[') {
      this.i++;
      const list = [];
      this.space();
      if (t[this.i] === ']') {
        this.i++;
        return list;
      }
      for (;;) {
        list.push(this.value());
        this.space();
        const next = t[this.i++];
        if (next === ']') return list;
        if (next !== ',') this.fail("expected ',' or ']'");
      }
    }
    if (c === '"') return this.string();
    for (const [word, v] of WORDS) {
      if (t.startsWith(word, this.i)) {
        this.i += word.length;
        return v;
      }
    }
    NUMBER.lastIndex = this.i;
    const m = NUMBER.exec(t);
    if (m === null) this.fail('unexpected character');
    this.i = NUMBER.lastIndex;
    const n = Number(m[0]);
    if (m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n)) {
      const big = BigInt(m[0]);
      if (big >= I64_MIN && big <= U64_MAX) return big;
    }
    return n;
  }
  string() {
    const t = this.text;
    const start = this.i;
    let i = start + 1;
    while (i < t.length && t[i] !== '"') i += t[i] === '\\' ? 2 : 1;
    if (i >= t.length) this.fail('unterminated string');
    this.i = i + 1;
    // The native parser unescapes (and refuses control characters).
    return JSON.parse(t.slice(start, i + 1));
  }
}

/** Encode `value` in `codec` (`'json'` or `'msgpack'`): a Uint8Array. */
export function encode(codec, value) {
  if (codec === MSGPACK) {
    const w = new Writer();
    pack(value, w);
    return w.finish();
  }
  return utf8Encode(checkJson(value) ? stringifyBig(value) : JSON.stringify(value));
}

/** Decode `bytes`, one value in `codec`. */
export function decode(codec, bytes) {
  if (codec === MSGPACK) {
    const r = { bytes, view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), i: 0 };
    let value;
    try {
      value = unpack(r);
    } catch (e) {
      if (e instanceof RangeError) throw new CodecError(`${bytes.length} bytes of MessagePack cut short`);
      throw e;
    }
    if (r.i !== bytes.length) {
      throw new CodecError(`${bytes.length - r.i} bytes after a MessagePack value of ${r.i}`);
    }
    return value;
  }
  const text = utf8Decode(bytes);
  try {
    return parseJson(text);
  } catch (e) {
    throw new CodecError(`cannot decode ${JSON.stringify(text.slice(0, 80))} as JSON: ${e.message}`);
  }
}

/** The value `bytes` in `from` written in `to` (the same bytes when the codecs agree). */
export function transcode(from, to, bytes) {
  return from === to ? bytes : encode(to, decode(from, bytes));
}

class Writer {
  constructor() {
    this.buf = new Uint8Array(64);
    this.view = new DataView(this.buf.buffer);
    this.n = 0;
  }
  room(k) {
    if (this.n + k <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.n + k) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.n));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(b) {
    this.room(1);
    this.buf[this.n++] = b;
  }
  head(marker, size, len) {
    this.room(1 + size);
    this.buf[this.n++] = marker;
    if (size === 1) this.buf[this.n++] = len;
    else if (size === 2) {
      this.view.setUint16(this.n, len);
      this.n += 2;
    } else {
      this.view.setUint32(this.n, len);
      this.n += 4;
    }
  }
  bytes(b) {
    this.room(b.length);
    this.buf.set(b, this.n);
    this.n += b.length;
  }
  finish() {
    return this.buf.slice(0, this.n);
  }
}

function packStr(s, w) {
  // ASCII fast path.
  let ascii = s.length < 256;
  for (let i = 0; ascii && i < s.length; i++) if (s.charCodeAt(i) > 127) ascii = false;
  if (ascii) {
    const n = s.length;
    if (n < 32) w.u8(0xa0 | n);
    else w.head(0xd9, 1, n);
    w.room(n);
    for (let i = 0; i < n; i++) w.buf[w.n++] = s.charCodeAt(i);
    return;
  }
  const b = utf8Encode(s);
  const n = b.length;
  if (n < 32) w.u8(0xa0 | n);
  else if (n < 0x100) w.head(0xd9, 1, n);
  else if (n < 0x10000) w.head(0xda, 2, n);
  else w.head(0xdb, 4, n);
  w.bytes(b);
}

function packNumber(v, w) {
  if (Number.isInteger(v) && Math.abs(v) <= Number.MAX_SAFE_INTEGER) {
    if (v >= 0) {
      if (v < 0x80) w.u8(v);
      else if (v < 0x100) w.head(0xcc, 1, v);
      else if (v < 0x10000) w.head(0xcd, 2, v);
      else if (v < 0x100000000) w.head(0xce, 4, v);
      else {
        w.room(9);
        w.buf[w.n++] = 0xcf;
        w.view.setBigUint64(w.n, BigInt(v));
        w.n += 8;
      }
    } else if (v >= -32) w.u8(v & 0xff);
    else if (v >= -0x80) {
      w.room(2);
      w.buf[w.n++] = 0xd0;
      w.view.setInt8(w.n++, v);
    } else if (v >= -0x8000) {
      w.room(3);
      w.buf[w.n++] = 0xd1;
      w.view.setInt16(w.n, v);
      w.n += 2;
    } else if (v >= -0x80000000) {
      w.room(5);
      w.buf[w.n++] = 0xd2;
      w.view.setInt32(w.n, v);
      w.n += 4;
    } else {
      w.room(9);
      w.buf[w.n++] = 0xd3;
      w.view.setBigInt64(w.n, BigInt(v));
      w.n += 8;
    }
    return;
  }
  w.room(9);
  w.buf[w.n++] = 0xcb;
  w.view.setFloat64(w.n, v);
  w.n += 8;
}

function pack(v, w) {
  switch (typeof v) {
    case 'string':
      return packStr(v, w);
    case 'number':
      return packNumber(v, w);
    case 'boolean':
      return w.u8(v ? 0xc3 : 0xc2);
    case 'bigint':
      if (v >= -(2n ** 63n) && v < 2n ** 64n) {
        w.room(9);
        if (v >= 0n) {
          if (v <= BigInt(Number.MAX_SAFE_INTEGER)) return packNumber(Number(v), w);
          w.buf[w.n++] = 0xcf;
          w.view.setBigUint64(w.n, v);
        } else {
          if (v >= -BigInt(Number.MAX_SAFE_INTEGER)) return packNumber(Number(v), w);
          w.buf[w.n++] = 0xd3;
          w.view.setBigInt64(w.n, v);
        }
        w.n += 8;
        return;
      }
      throw new CodecError(`the integer ${v} does not fit in 64 bits`);
    case 'object':
      if (v === null) return w.u8(0xc0);
      if (Array.isArray(v)) {
        const n = v.length;
        if (n < 16) w.u8(0x90 | n);
        else if (n < 0x10000) w.head(0xdc, 2, n);
        else w.head(0xdd, 4, n);
        for (let i = 0; i < n; i++) pack(v[i], w);
        return;
      }
      if (v instanceof Uint8Array) {
        const n = v.length;
        if (n < 0x100) w.head(0xc4, 1, n);
        else if (n < 0x10000) w.head(0xc5, 2, n);
        else w.head(0xc6, 4, n);
        w.bytes(v);
        return;
      }
      if (v instanceof Map) {
        return packEntries([...v.entries()].map(([k, x]) => [String(k), x]), w);
      }
      return packEntries(Object.entries(v), w);
    default:
      throw new CodecError(`cannot encode ${shown(v)} (a ${typeof v}) as MessagePack`);
  }
}

function packEntries(entries, w) {
  let n = 0;
  for (const [, x] of entries) if (x !== undefined) n++;
  if (n < 16) w.u8(0x80 | n);
  else if (n < 0x10000) w.head(0xde, 2, n);
  else w.head(0xdf, 4, n);
  // As JSON: a field whose value is undefined is left out.
  for (const [k, x] of entries) {
    if (x === undefined) continue;
    packStr(k, w);
    pack(x, w);
  }
}

function unpackLen(r, size) {
  const v = r.view;
  let n;
  if (size === 1) n = v.getUint8(r.i);
  else if (size === 2) n = v.getUint16(r.i);
  else n = v.getUint32(r.i);
  r.i += size;
  return n;
}

function unpackStr(r, n) {
  const end = r.i + n;
  if (end > r.bytes.length) throw new RangeError('cut short');
  const b = r.bytes;
  let s;
  let ascii = n < 64;
  for (let i = r.i; ascii && i < end; i++) if (b[i] > 127) ascii = false;
  if (ascii) {
    s = '';
    for (let i = r.i; i < end; i++) s += String.fromCharCode(b[i]);
  } else {
    s = utf8Decode(b, r.i, end);
  }
  r.i = end;
  return s;
}

function unpackArray(r, n) {
  const out = new Array(n);
  for (let k = 0; k < n; k++) out[k] = unpack(r);
  return out;
}

function unpackMap(r, n) {
  const out = {};
  for (let k = 0; k < n; k++) {
    const key = unpack(r);
    if (key !== null && typeof key === 'object') throw new CodecError('a MessagePack map key is an array or a map');
    out[String(key)] = unpack(r);
  }
  return out;
}

/** A 64-bit integer: a number when one holds it exactly, else a BigInt. */
export function exact(x) {
  return x <= SAFE && x >= -SAFE ? Number(x) : x;
}

function unpack(r) {
  const v = r.view;
  const b = v.getUint8(r.i++);
  if (b < 0x80) return b;
  if (b >= 0xe0) return b - 0x100;
  if (b >= 0xa0 && b < 0xc0) return unpackStr(r, b & 31);
  if (b >= 0x90 && b < 0xa0) return unpackArray(r, b & 15);
  if (b >= 0x80 && b < 0x90) return unpackMap(r, b & 15);
  let x;
  switch (b) {
    case 0xc0:
      return null;
    case 0xc2:
      return false;
    case 0xc3:
      return true;
    case 0xcc:
      return unpackLen(r, 1);
    case 0xcd:
      return unpackLen(r, 2);
    case 0xce:
      return unpackLen(r, 4);
    case 0xcf:
      x = v.getBigUint64(r.i);
      r.i += 8;
      return exact(x);
    case 0xd0:
      x = v.getInt8(r.i);
      r.i += 1;
      return x;
    case 0xd1:
      x = v.getInt16(r.i);
      r.i += 2;
      return x;
    case 0xd2:
      x = v.getInt32(r.i);
      r.i += 4;
      return x;
    case 0xd3:
      x = v.getBigInt64(r.i);
      r.i += 8;
      return exact(x);
    case 0xca:
      x = v.getFloat32(r.i);
      r.i += 4;
      return x;
    case 0xcb:
      x = v.getFloat64(r.i);
      r.i += 8;
      return x;
    case 0xd9:
      return unpackStr(r, unpackLen(r, 1));
    case 0xda:
      return unpackStr(r, unpackLen(r, 2));
    case 0xdb:
      return unpackStr(r, unpackLen(r, 4));
    case 0xc4:
    case 0xc5:
    case 0xc6: {
      const n = unpackLen(r, b === 0xc4 ? 1 : b === 0xc5 ? 2 : 4);
      if (r.i + n > r.bytes.length) throw new RangeError('cut short');
      const out = r.bytes.slice(r.i, r.i + n);
      r.i += n;
      return out;
    }
    case 0xdc:
      return unpackArray(r, unpackLen(r, 2));
    case 0xdd:
      return unpackArray(r, unpackLen(r, 4));
    case 0xde:
      return unpackMap(r, unpackLen(r, 2));
    case 0xdf:
      return unpackMap(r, unpackLen(r, 4));
    default:
      throw new CodecError(`MessagePack type 0x${b.toString(16)} (an extension) has no Weir value`);
  }
}
