// The contract's `batch` (records' bytes in one buffer, four span numbers and
// a timestamp per record) and `packed` byte strings.

/** A record's key offset when it has no key. */
export const NO_KEY = 0xffffffff;
/** A record's timestamp when it has none (the smallest s64, as a number). */
export const NO_TIMESTAMP = -9223372036854775808;

/** Records, or bytes of them, an output collects before it is handed over in
 * the middle of a call. */
export const HAND_OVER_RECORDS = 16384;
export const HAND_OVER_BYTES = 4 << 20;

/** Bytes as a string usable as a Map key (one char per byte). */
export function keyString(bytes) {
  let s = '';
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return s;
}

/** The records of a batch as {key, value, timestamp}, checked. Timestamps
 * arrive as numbers or BigInts (the JS engines differ). */
export function records(data, spans, timestamps) {
  const n = timestamps.length;
  if (spans.length !== 4 * n) {
    throw new Error(`a batch has ${spans.length} spans for ${n} timestamps (4 per record)`);
  }
  const size = data.length;
  const out = new Array(n);
  for (let i = 0; i < n; i++) {
    // Unsigned: an engine may lift a u32 from 2^31 as a negative number.
    const ko = spans[4 * i] >>> 0;
    const kl = spans[4 * i + 1] >>> 0;
    const vo = spans[4 * i + 2] >>> 0;
    const vl = spans[4 * i + 3] >>> 0;
    if (vo + vl > size || (ko !== NO_KEY && ko + kl > size)) {
      throw new Error(`record ${i}'s span is outside the batch's ${size} bytes`);
    }
    const t = Number(timestamps[i]);
    out[i] = {
      key: ko === NO_KEY ? null : data.subarray(ko, ko + kl),
      value: data.subarray(vo, vo + vl),
      timestamp: t === NO_TIMESTAMP ? null : t,
    };
  }
  return out;
}

/** Records being built, packed into one buffer. */
export class OutBatch {
  constructor() {
    this.data = new Uint8Array(256);
    this.size = 0;
    this.spans = [];
    this.timestamps = [];
  }

  get length() {
    return this.timestamps.length;
  }

  append(bytes) {
    const need = this.size + bytes.length;
    if (need > this.data.length) {
      let cap = this.data.length * 2;
      while (cap < need) cap *= 2;
      const next = new Uint8Array(cap);
      next.set(this.data.subarray(0, this.size));
      this.data = next;
    }
    this.data.set(bytes, this.size);
    this.size = need;
  }

  push(key, value, timestamp) {
    let ko = NO_KEY;
    let kl = 0;
    if (key != null) {
      ko = this.size;
      kl = key.length;
      this.append(key);
    }
    const vo = this.size;
    this.append(value);
    this.spans.push(ko, kl, vo, value.length);
    this.timestamps.push(timestamp == null ? NO_TIMESTAMP : timestamp);
  }

  isLarge() {
    return this.timestamps.length >= HAND_OVER_RECORDS || this.size >= HAND_OVER_BYTES;
  }

  /** The bytes written, without spare room. */
  bytes() {
    return this.data.subarray(0, this.size);
  }

  records() {
    return records(this.bytes(), this.spans, this.timestamps);
  }
}

/** Byte strings as the contract's `packed`: {data, ends}. */
export function pack(strings) {
  let total = 0;
  for (const s of strings) total += s.length;
  const data = new Uint8Array(total);
  const ends = new Array(strings.length);
  let n = 0;
  strings.forEach((s, i) => {
    data.set(s, n);
    n += s.length;
    ends[i] = n;
  });
  return { data, ends };
}

/** The byte strings of a `packed`, checked. */
export function unpack(data, ends) {
  const out = new Array(ends.length);
  let start = 0;
  for (let i = 0; i < ends.length; i++) {
    const end = ends[i];
    if (end < start || end > data.length) {
      throw new Error(`a packed string ends at ${end}, outside ${start}..${data.length}`);
    }
    out[i] = data.subarray(start, end);
    start = end;
  }
  return out;
}
