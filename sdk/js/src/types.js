// Record types: what an operator declares it reads and writes.
//
//   import * as weir from 'weir';
//   const { record, u32, u64, i64, f64, optional, string } = weir.types;
//   const Event = record({ id: u64, k: u32, price: u64, ts: i64 });
//   const Priced = record({ id: u64, dollars: f64, note: optional(string) });
//   weir.map('price', (e) => ({ id: e.id, dollars: 0.908 * e.price, note: null }),
//            { input: Event, output: Priced });
//
// A job is then checked when it is submitted (an upstream that writes
// something else is refused, naming both operators and the field), and the
// records travel as rows when their neighbours read and write exactly that
// type. Records are plain objects with the type's fields either way.

const SCALARS = ['bool', 'i8', 'i16', 'i32', 'i64', 'u8', 'u16', 'u32', 'u64', 'f32', 'f64'];
const KINDS = new Set([...SCALARS, 'string', 'bytes', 'json', 'optional', 'list', 'record']);

const leaf = (kind) => Object.freeze({ kind });

export const bool = leaf('bool');
export const i8 = leaf('i8');
export const i16 = leaf('i16');
export const i32 = leaf('i32');
export const i64 = leaf('i64');
export const u8 = leaf('u8');
export const u16 = leaf('u16');
export const u32 = leaf('u32');
export const u64 = leaf('u64');
export const f32 = leaf('f32');
export const f64 = leaf('f64');
/** UTF-8 text: a string. */
export const string = leaf('string');
/** Bytes: a Uint8Array. */
export const bytes = leaf('bytes');
/** Any JSON value. */
export const json = leaf('json');

/** Whether `t` is a type made here. */
export function isType(t) {
  return t != null && typeof t === 'object' && KINDS.has(t.kind);
}

function check(t, where) {
  if (!isType(t)) throw new TypeError(`${where}: ${JSON.stringify(t) ?? String(t)} is not a Weir type (weir.types)`);
  return t;
}

/** `t` or null. */
export function optional(t) {
  check(t, 'optional');
  if (t.kind === 'optional') throw new TypeError('an optional of an optional has no Weir type');
  return Object.freeze({ kind: 'optional', inner: t });
}

/** A list of `t`s: an array. */
export function list(t) {
  return Object.freeze({ kind: 'list', inner: check(t, 'list') });
}

/** A record of named fields, in the order given: an object. */
export function record(fields) {
  if (fields == null || typeof fields !== 'object' || Array.isArray(fields)) {
    throw new TypeError('record({ name: type, ... }) needs an object of field types');
  }
  const entries = Object.entries(fields).map(([name, t]) => [name, check(t, `field \`${name}\``)]);
  return Object.freeze({ kind: 'record', fields: Object.freeze(entries) });
}

/** A field name as the syntax writes it: quoted unless an identifier. */
const fieldName = (name) => (/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) ? name : JSON.stringify(name));

/** The type in Weir's type syntax (`{id: u64, name: string?}`). */
export function text(t) {
  switch (t.kind) {
    case 'optional':
      return `${text(t.inner)}?`;
    case 'list':
      return `list<${text(t.inner)}>`;
    case 'record':
      return `{${t.fields.map(([name, f]) => `${fieldName(name)}: ${text(f)}`).join(', ')}}`;
    default:
      return t.kind;
  }
}
