// Typed values in every codec: rows (the contract's binary layout, read and
// written with a DataView) and, for JSON and MessagePack, plain values
// converted to and from the declared type. 64-bit integers are numbers when
// a number holds them exactly (up to 2^53 − 1 in magnitude), else BigInts,
// as the codecs read them.

import { CodecError, JSON_CODEC, MSGPACK, decode, encode, exact, parseJson, shown, transcode, utf8Decode, utf8Encode } from './codec.js';

export const ROW = 'row';

/** Fixed-width types: width, reader, writer (little-endian) and range. */
const SCALARS = {
  bool: [1, (v, i) => v.getUint8(i) !== 0, (v, i, x) => v.setUint8(i, x ? 1 : 0)],
  i8: [1, (v, i) => v.getInt8(i), (v, i, x) => v.setInt8(i, Number(x)), -(2 ** 7), 2 ** 7 - 1],
  i16: [2, (v, i) => v.getInt16(i, true), (v, i, x) => v.setInt16(i, Number(x), true), -(2 ** 15), 2 ** 15 - 1],
  i32: [4, (v, i) => v.getInt32(i, true), (v, i, x) => v.setInt32(i, Number(x), true), -(2 ** 31), 2 ** 31 - 1],
  i64: [8, (v, i) => exact(v.getBigInt64(i, true)), (v, i, x) => v.setBigInt64(i, BigInt(x), true), -(2n ** 63n), 2n ** 63n - 1n],
  u8: [1, (v, i) => v.getUint8(i), (v, i, x) => v.setUint8(i, Number(x)), 0, 2 ** 8 - 1],
  u16: [2, (v, i) => v.getUint16(i, true), (v, i, x) => v.setUint16(i, Number(x), true), 0, 2 ** 16 - 1],
  u32: [4, (v, i) => v.getUint32(i, true), (v, i, x) => v.setUint32(i, Number(x), true), 0, 2 ** 32 - 1],
  u64: [8, (v, i) => exact(v.getBigUint64(i, true)), (v, i, x) => v.setBigUint64(i, BigInt(x), true), 0n, 2n ** 64n - 1n],
  f32: [4, (v, i) => v.getFloat32(i, true), (v, i, x) => v.setFloat32(i, x, true)],
  f64: [8, (v, i) => v.getFloat64(i, true), (v, i, x) => v.setFloat64(i, x, true)],
};

const F32_MAX = 3.4028234663852886e38;

const width = (t) => (t.kind === 'optional' ? width(t.inner) : SCALARS[t.kind]?.[0] ?? 8);

/** A record type compiled: each field's slot. */
const plans = new WeakMap();
function plan(t) {
  let p = plans.get(t);
  if (p === undefined) {
    const bitmap = (t.fields.length + 7) >> 3;
    let offset = bitmap;
    const fields = t.fields.map(([name, f]) => {
      const optional = f.kind === 'optional';
      const inner = optional ? f.inner : f;
      const slot = { name, inner, optional, offset, scalar: SCALARS[inner.kind] };
      offset += width(f);
      return slot;
    });
    p = { fields, bitmap, fixed: offset };
    plans.set(t, p);
  }
  return p;
}

// --- rows to values ----------------------------------------------------------

function viewOf(bytes) {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function payload(t, bytes, view, start, end) {
  switch (t.kind) {
    case 'string':
      return utf8Decode(bytes, start, end);
    case 'bytes':
      return bytes.slice(start, end);
    case 'json':
      try {
        return parseJson(utf8Decode(bytes, start, end));
      } catch (e) {
        throw new CodecError(`a json field is not JSON: ${e.message}`);
      }
    case 'record':
      return readRecord(plan(t), bytes, view, start, end);
    case 'list':
      return readList(t.inner, bytes, view, start, end);
    default:
      throw new CodecError(`a ${t.kind} is no payload`);
  }
}

function varSlot(view, at, start, end, what) {
  if (at + 8 > end) throw new CodecError(`${what}'s slot is outside its row`);
  const s = start + view.getUint32(at, true);
  const e = s + view.getUint32(at + 4, true);
  if (e > end) throw new CodecError(`${what}'s ${e - s} bytes are outside its row's ${end - start}`);
  return [s, e];
}

function readRecord(p, bytes, view, start, end) {
  if (end - start < p.fixed) {
    throw new CodecError(`a row of ${end - start} bytes, shorter than its ${p.fixed} bytes of slots`);
  }
  const out = {};
  for (let i = 0; i < p.fields.length; i++) {
    const f = p.fields[i];
    if (f.optional && (bytes[start + (i >> 3)] >> (i & 7)) & 1) {
      out[f.name] = null;
    } else if (f.scalar) {
      out[f.name] = f.scalar[1](view, start + f.offset);
    } else {
      const [s, e] = varSlot(view, start + f.offset, start, end, `field \`${f.name}\``);
      out[f.name] = payload(f.inner, bytes, view, s, e);
    }
  }
  return out;
}

function readList(element, bytes, view, start, end) {
  if (end - start < 4) throw new CodecError('a list payload shorter than its count');
  const count = view.getUint32(start, true);
  const optional = element.kind === 'optional';
  const inner = optional ? element.inner : element;
  const w = width(inner);
  const slots = 4 + ((count + 7) >> 3);
  if (slots + count * w > end - start) {
    throw new CodecError(`a list of ${count} elements does not fit its ${end - start} bytes`);
  }
  const scalar = SCALARS[inner.kind];
  const out = new Array(count);
  for (let i = 0; i < count; i++) {
    const at = start + slots + i * w;
    if (optional && (bytes[start + 4 + (i >> 3)] >> (i & 7)) & 1) out[i] = null;
    else if (scalar) out[i] = scalar[1](view, at);
    else {
      const [s, e] = varSlot(view, at, start, end, `element ${i}`);
      out[i] = payload(inner, bytes, view, s, e);
    }
  }
  return out;
}

function readValue(t, bytes, view, start, end) {
  if (t.kind === 'optional') return start === end ? null : readValue(t.inner, bytes, view, start + 1, end);
  const scalar = SCALARS[t.kind];
  if (scalar) {
    if (end - start !== scalar[0]) throw new CodecError(`a ${t.kind} of ${end - start} bytes (it has ${scalar[0]})`);
    return scalar[1](view, start);
  }
  return payload(t, bytes, view, start, end);
}

/** The value of `t` in its value encoding `bytes` (a record's row, ...). */
export function read(t, bytes) {
  return readValue(t, bytes, viewOf(bytes), 0, bytes.length);
}

// --- values to rows ----------------------------------------------------------

function concat(parts, total) {
  const out = new Uint8Array(total);
  let n = 0;
  for (const p of parts) {
    out.set(p, n);
    n += p.length;
  }
  return out;
}

function checkScalar(kind, x, what) {
  const s = SCALARS[kind];
  if (kind === 'bool') {
    if (typeof x !== 'boolean') throw new CodecError(`${what}: ${shown(x)} is not a boolean`);
  } else if (kind === 'f32' || kind === 'f64') {
    if (typeof x !== 'number') throw new CodecError(`${what}: ${shown(x)} is not a number`);
    if (kind === 'f32' && Number.isFinite(x) && Math.abs(x) > F32_MAX) {
      throw new CodecError(`${what}: ${x} is out of f32's range`);
    }
  } else {
    const whole = typeof x === 'bigint' || Number.isInteger(x);
    if (!whole) throw new CodecError(`${what}: ${shown(x)} is not a whole number`);
    const big = typeof s[3] === 'bigint';
    const v = big ? BigInt(x) : Number(x);
    if (v < s[3] || v > s[4]) throw new CodecError(`${what}: ${x} is out of ${kind}'s range`);
  }
}

function writePayload(t, x) {
  switch (t.kind) {
    case 'string':
      if (typeof x !== 'string') throw new CodecError(`${shown(x)} is not a string`);
      return utf8Encode(x);
    case 'bytes':
      if (!(x instanceof Uint8Array)) throw new CodecError('bytes must be a Uint8Array');
      return x;
    case 'json':
      return encode(JSON_CODEC, x === undefined ? null : x);
    case 'record':
      return writeRecord(plan(t), x);
    case 'list':
      return writeList(t.inner, x);
    default:
      throw new CodecError(`a ${t.kind} is no payload`);
  }
}

function writeRecord(p, value) {
  if (value == null || typeof value !== 'object' || Array.isArray(value) || value instanceof Uint8Array) {
    throw new CodecError(`${shown(value)} is not a record`);
  }
  const fixed = new Uint8Array(p.fixed);
  const view = viewOf(fixed);
  const parts = [fixed];
  let offset = p.fixed;
  p.fields.forEach((f, i) => {
    let x = value[f.name];
    if (x == null) {
      if (f.inner.kind === 'json' && !f.optional) x = null;
      else if (!f.optional) throw new CodecError(`field \`${f.name}\` is ${x}, but its type is not optional`);
      else {
        fixed[i >> 3] |= 1 << (i & 7);
        return;
      }
    }
    if (f.scalar) {
      checkScalar(f.inner.kind, x, `field \`${f.name}\``);
      f.scalar[2](view, f.offset, x);
      return;
    }
    let bytes;
    try {
      bytes = writePayload(f.inner, x);
    } catch (e) {
      throw e instanceof CodecError ? new CodecError(`field \`${f.name}\`: ${e.message}`) : e;
    }
    view.setUint32(f.offset, offset, true);
    view.setUint32(f.offset + 4, bytes.length, true);
    parts.push(bytes);
    offset += bytes.length;
  });
  return concat(parts, offset);
}

function writeList(element, values) {
  if (!Array.isArray(values)) throw new CodecError(`${shown(values)} is not an array`);
  const optional = element.kind === 'optional';
  const inner = optional ? element.inner : element;
  const w = width(inner);
  const count = values.length;
  const slots = 4 + ((count + 7) >> 3);
  const fixed = new Uint8Array(slots + count * w);
  const view = viewOf(fixed);
  view.setUint32(0, count, true);
  const scalar = SCALARS[inner.kind];
  const parts = [fixed];
  let offset = fixed.length;
  values.forEach((x, i) => {
    const at = slots + i * w;
    if (x == null && !(inner.kind === 'json' && !optional)) {
      if (!optional) throw new CodecError(`element ${i} is ${x}, but the list's are not optional`);
      fixed[4 + (i >> 3)] |= 1 << (i & 7);
      return;
    }
    if (scalar) {
      checkScalar(inner.kind, x, `element ${i}`);
      scalar[2](view, at, x);
      return;
    }
    const bytes = writePayload(inner, x);
    view.setUint32(at, offset, true);
    view.setUint32(at + 4, bytes.length, true);
    parts.push(bytes);
    offset += bytes.length;
  });
  return concat(parts, offset);
}

/** `value` of `t` in its value encoding. */
export function write(t, value) {
  if (t.kind === 'optional') {
    if (value == null) return new Uint8Array(0);
    const inner = write(t.inner, value);
    return concat([Uint8Array.of(1), inner], inner.length + 1);
  }
  const scalar = SCALARS[t.kind];
  if (scalar) {
    checkScalar(t.kind, value, 'value');
    const out = new Uint8Array(scalar[0]);
    scalar[2](viewOf(out), 0, value);
    return out;
  }
  return writePayload(t, value);
}

// --- plain values (JSON, MessagePack) and typed ones ---------------------------

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

function toBase64(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    s += B64[n >> 18] + B64[(n >> 12) & 63];
    s += i + 1 < bytes.length ? B64[(n >> 6) & 63] : '=';
    s += i + 2 < bytes.length ? B64[n & 63] : '=';
  }
  return s;
}

function fromBase64(s) {
  const clean = s.replace(/=+$/, '');
  const out = new Uint8Array(Math.floor((clean.length * 3) / 4));
  let bits = 0;
  let acc = 0;
  let n = 0;
  for (const c of clean) {
    const v = B64.indexOf(c);
    if (v < 0) throw new CodecError(`${JSON.stringify(s.slice(0, 20))} is not base64`);
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[n++] = (acc >> bits) & 0xff;
    }
  }
  return out.subarray(0, n);
}

/** A plain decoded value as `t`'s: a record's declared fields by name (a
 * missing optional one null), bytes from base64 text. */
export function fromPlain(t, value, codec) {
  if (t.kind === 'optional') return value == null ? null : fromPlain(t.inner, value, codec);
  if (value == null && t.kind !== 'json') throw new CodecError(`null where a ${t.kind} is needed`);
  switch (t.kind) {
    case 'record': {
      if (typeof value !== 'object' || Array.isArray(value)) throw new CodecError(`${shown(value)} is not a record`);
      const out = {};
      for (const [name, f] of t.fields) {
        try {
          out[name] = fromPlain(f, value[name], codec);
        } catch (e) {
          throw e instanceof CodecError ? new CodecError(`field \`${name}\`: ${e.message}`) : e;
        }
      }
      return out;
    }
    case 'list':
      if (!Array.isArray(value)) throw new CodecError(`${shown(value)} is not an array`);
      return value.map((v) => fromPlain(t.inner, v, codec));
    case 'bytes':
      return typeof value === 'string' ? fromBase64(value) : value;
    case 'f32':
    case 'f64':
      // A whole number past 2^53 in JSON text reads as a BigInt.
      return typeof value === 'bigint' ? Number(value) : value;
    default:
      return value;
  }
}

/** A typed value as plain values the codec writes: a record's fields in
 * order, bytes as base64 text in JSON. */
export function toPlain(t, value, codec) {
  if (value == null) return null;
  switch (t.kind) {
    case 'optional':
      return toPlain(t.inner, value, codec);
    case 'record': {
      const out = {};
      for (const [name, f] of t.fields) out[name] = toPlain(f, value[name], codec);
      return out;
    }
    case 'list':
      return value.map((v) => toPlain(t.inner, v, codec));
    case 'bytes':
      return codec === JSON_CODEC ? toBase64(value) : value;
    case 'i64':
    case 'u64':
      // A whole number past 2^53 in a 64-bit integer field is written as
      // the integer it is (JSON would write a number that large as a float).
      return typeof value === 'number' && Number.isInteger(value) && !Number.isSafeInteger(value) ? BigInt(value) : value;
    default:
      return value;
  }
}

const fails = (message) => () => {
  throw new CodecError(message);
};

/** How an operator reads its records: `codec` with its declared type. */
export function reader(codec, t) {
  if (t == null) return codec === ROW ? fails('rows reach an operator that declares no input type') : (b) => decode(codec, b);
  if (codec === ROW) return (b) => read(t, b);
  return (b) => fromPlain(t, decode(codec, b), codec);
}

/** How an operator writes its records: `codec` with its declared type. */
export function writer(codec, t) {
  if (t == null) return codec === ROW ? fails('rows are asked of an operator that declares no output type') : (v) => encode(codec, v);
  if (codec === ROW) return (v) => write(t, v);
  return (v) => encode(codec, toPlain(t, v, codec));
}

/** The codec of a stream's keys: a row stream's are MessagePack. */
export const keyCodec = (codec) => (codec === ROW ? MSGPACK : codec);

/** An operator's codecs with its types: `read`, `write`, `transcode` (an
 * input record as an output one), and its keys' codecs. */
export function typedCodecs(codecs, input, output) {
  const read = reader(codecs.input, input);
  const write = writer(codecs.output, output);
  return {
    ...codecs,
    read,
    write,
    // An input record as an output one, all of it: read as its type only
    // from rows (whose type is the stream's; a declared type may read fewer
    // fields than a record has).
    transcode: (b) => {
      if (codecs.input === codecs.output) return b;
      return codecs.input === ROW ? write(read(b)) : transcode(codecs.input, codecs.output, b);
    },
    inputKeys: keyCodec(codecs.input),
    outputKeys: keyCodec(codecs.output),
  };
}
