// Run an operator natively, under `node --test`, without WebAssembly.
//
// `Harness` creates an operator registered with the SDK's functions, hands it
// records (with key and timestamp), moves the watermark and the processing
// time, and returns what it emitted. State, timers and windows live in
// memory; the operator runs through the same code as in the component (the
// same state cache, the same codecs).

import { JSON_CODEC, MSGPACK, decode, encode, transcode } from './codec.js';
import { ROW, keyCodec, read, reader, toPlain, writer } from './rows.js';
import { OutBatch, keyString, unpack } from './batch.js';
import { TimeDomain } from './context.js';
import { Instance, OperatorError } from './driver.js';
import { REGISTRY } from './operators.js';

export { OperatorError };

const domainOf = (processingTime) => (processingTime ? TimeDomain.PROCESSING_TIME : TimeDomain.EVENT_TIME);

/** Tumbling windows [k·size, (k + 1)·size). */
export function tumbling(sizeMs, { allowedLatenessMs = 0, processingTime = false } = {}) {
  return { kind: 'tumbling', sizeMs, slideMs: null, gapMs: null, domain: domainOf(processingTime), allowedLatenessMs };
}

/** Sliding windows [k·slide, k·slide + size). */
export function sliding(sizeMs, slideMs, { allowedLatenessMs = 0, processingTime = false } = {}) {
  return { kind: 'sliding', sizeMs, slideMs, gapMs: null, domain: domainOf(processingTime), allowedLatenessMs };
}

/** Session windows: [t, t + gap) per record, merged while they meet. */
export function session(gapMs, { allowedLatenessMs = 0, processingTime = false } = {}) {
  return { kind: 'session', sizeMs: null, slideMs: null, gapMs, domain: domainOf(processingTime), allowedLatenessMs };
}

/** Keyed state and timers in memory; a call's effects are staged and
 * applied only when it succeeds, as on a worker. */
class MemoryHost {
  constructor() {
    this.declared = [];
    this.values = new Map();
    this.lists = new Map();
    this.maps = new Map();
    this.timers = new Map();
    this.staged = [];
    // States declared with a time-to-live: their values are kept stamped
    // with their expiry time, as the runtime keeps them.
    this.ttls = new Map();
    this.now = 0;
  }
  declareStateTtl(name, kind, ttlMs, refreshOnRead) {
    const i = this.declareState(name, kind);
    this.ttls.set(i, { ttlMs, refreshOnRead });
    return i;
  }
  // The harness keeps the rows as the operator writes them.
  declareTypedState(name, kind, ttl, _valueType) {
    return ttl == null ? this.declareState(name, kind) : this.declareStateTtl(name, kind, ttl.ttlMs, ttl.refreshOnRead);
  }
  stamp(state, value) {
    const ttl = this.ttls.get(state);
    if (!ttl) return value;
    const out = new Uint8Array(8 + value.length);
    new DataView(out.buffer).setBigInt64(0, BigInt(this.now + ttl.ttlMs));
    out.set(value, 8);
    return out;
  }
  /** A list replaced by `values`, as stored: an element the stored list
   * holds, alive, keeps its expiry time (as the runtime keeps it); the others
   * are stamped now (all, when reads renew). */
  restamp(state, a, values) {
    const ttl = this.ttls.get(state);
    if (!ttl) return [...values];
    const kept = new Map();
    if (!ttl.refreshOnRead) {
      for (const old of this.lists.get(a) ?? []) {
        const at = Number(new DataView(old.buffer, old.byteOffset, old.byteLength).getBigInt64(0));
        if (at > this.now) {
          const id = keyString(old.slice(8));
          kept.set(id, [...(kept.get(id) ?? []), old]);
        }
      }
    }
    return values.map((v) => kept.get(keyString(v))?.shift() ?? this.stamp(state, v));
  }
  /** A stored value as read, and what stays stored (null: it expired). */
  read(state, stored) {
    const ttl = this.ttls.get(state);
    if (!ttl || stored == null) return [stored ?? null, stored ?? null];
    const view = new DataView(stored.buffer, stored.byteOffset, stored.byteLength);
    if (Number(view.getBigInt64(0)) <= this.now) return [null, null];
    const value = stored.slice(8);
    return [value, ttl.refreshOnRead ? this.stamp(state, value) : stored];
  }
  addr(state, key) {
    return `${state}/${keyString(key)}`;
  }
  declareState(name, kind) {
    const i = this.declared.findIndex(([n]) => n === name);
    if (i >= 0) {
      if (this.declared[i][1] !== kind) throw new Error(`state \`${name}\` is already declared with another kind`);
      return i;
    }
    this.declared.push([name, kind]);
    return this.declared.length - 1;
  }
  getValues(states, keys) {
    const out = [];
    for (const k of keys) {
      for (const s of states) {
        const a = this.addr(s, k);
        const [value, kept] = this.read(s, this.values.get(a));
        if (kept == null) this.values.delete(a);
        else this.values.set(a, kept);
        out.push(value);
      }
    }
    return out;
  }
  getList(state, key) {
    const a = this.addr(state, key);
    const read = (this.lists.get(a) ?? []).map((v) => this.read(state, v));
    if (this.ttls.has(state) && this.lists.has(a)) this.lists.set(a, read.map(([, kept]) => kept).filter((v) => v != null));
    return read.map(([value]) => value).filter((v) => v != null);
  }
  getEntry(state, key, mapKey) {
    const m = this.maps.get(this.addr(state, key));
    const id = keyString(mapKey);
    const [value, kept] = this.read(state, m?.get(id)?.[1]);
    if (kept == null) m?.delete(id);
    else m.set(id, [mapKey, kept]);
    return value;
  }
  getEntries(state, key) {
    const m = this.maps.get(this.addr(state, key));
    if (!m) return [];
    return [...m.entries()]
      .sort((a, b) => (a[0] < b[0] ? -1 : 1))
      .map(([, [k]]) => [k, this.getEntry(state, key, k)])
      .filter(([, v]) => v != null);
  }
  emit(batch) {
    this.staged.push(['emit', batch.records().map((r) => ({ ...r, value: r.value.slice() }))]);
  }
  emitSide(name, batch) {
    this.staged.push(['side', [name, batch.records().map((r) => ({ ...r, value: r.value.slice() }))]]);
  }
  putValues(state, keys, values) {
    this.staged.push(['puts', [state, keys, values]]);
  }
  updateState(ops) {
    this.staged.push(['state', ops]);
  }
  updateTimers(ops) {
    this.staged.push(['timers', ops]);
  }
  log(level, message) {
    console.error(`[${level}] ${message}`);
  }
  commit() {
    const main = [];
    const side = new Map();
    for (const [what, arg] of this.staged) {
      if (what === 'emit') main.push(...arg);
      else if (what === 'side') side.set(arg[0], [...(side.get(arg[0]) ?? []), ...arg[1]]);
      else if (what === 'puts') {
        const [state, keys, values] = arg;
        const ks = unpack(keys.data, keys.ends);
        const vs = unpack(values.data, values.ends);
        ks.forEach((k, i) => this.values.set(this.addr(state, k), this.stamp(state, vs[i].slice())));
      } else if (what === 'state') {
        for (const o of arg) {
          const a = this.addr(o.state, o.key);
          if (o.op === 'clear') {
            this.values.delete(a);
            this.lists.delete(a);
            this.maps.delete(a);
          } else if (o.op === 'append-list') this.lists.set(a, [...(this.lists.get(a) ?? []), ...o.values.map((v) => this.stamp(o.state, v))]);
          else if (o.op === 'replace-list') this.lists.set(a, this.restamp(o.state, a, o.values));
          else if (o.op === 'put-entry') {
            if (!this.maps.has(a)) this.maps.set(a, new Map());
            this.maps.get(a).set(keyString(o.mapKey), [o.mapKey, this.stamp(o.state, o.value)]);
          } else this.maps.get(a)?.delete(keyString(o.mapKey));
        }
      } else {
        for (const o of arg) {
          const id = `${o.time}|${o.domain}|${keyString(o.key)}`;
          if (o.register) this.timers.set(id, { time: o.time, domain: o.domain, key: o.key });
          else this.timers.delete(id);
        }
      }
    }
    this.staged = [];
    return { main, side };
  }
}

/** Runs one registered operator (by its name, or the registered function or
 * class) with in-memory state, timers and windows. Options: `params` (the
 * job's parameters), `window` (`tumbling`, `sliding`, `session`), `msgpack`
 * (records and state as MessagePack, as between components on a cluster),
 * `rows` (an operator that declares types reads and writes rows, as beside
 * operators of the same types; the rest is MessagePack). */
export class Harness {
  constructor(operator, { params = {}, window = null, msgpack = false, rows = false } = {}) {
    const name = typeof operator === 'string' ? operator : [...REGISTRY.values()].find((e) => e.target === operator)?.name;
    const entry = REGISTRY.get(name);
    if (entry === undefined) {
      throw new OperatorError(`no operator named \`${name ?? operator}\` (registered: ${[...REGISTRY.keys()].join(', ')})`);
    }
    const codec = msgpack || rows ? MSGPACK : JSON_CODEC;
    const input = rows && entry.inputType != null ? ROW : codec;
    const output = rows && entry.writes != null ? ROW : codec;
    this.codecs = { input, output, sideOutputs: {}, state: codec };
    this.inputType = entry.inputType;
    this.encodeInput = writer(input, entry.inputType);
    this.decodeOutput = reader(output, entry.writes);
    this.host = new MemoryHost();
    this.keyed = entry.keyed || entry.window;
    this.windows = window ? { spec: window, aggregate: entry.kind === 'window', open: new Map(), fired: new Set() } : null;
    /** The task's watermark (null before the first). */
    this.watermark = null;
    /** The worker's processing time, ms. */
    this.processingTime = 0;
    this.side = new Map();
    this.lastTimestamps = [];
    this.instance = new Instance(name, Object.entries(params).map(([k, v]) => [k, String(v)]), window, this.codecs, this.host);
  }

  outputs() {
    const { main, side } = this.host.commit();
    for (const [name, recs] of side) this.side.set(name, [...(this.side.get(name) ?? []), ...recs]);
    this.lastTimestamps = main.map((r) => r.timestamp);
    return main.map((r) => this.decodeOutput(r.value));
  }

  call(f) {
    try {
      f();
    } catch (e) {
      this.host.staged = [];
      throw e;
    }
    return this.outputs();
  }

  /** Hand the operator one record; what it emitted (for a window function,
   * the windows that fired again at once). */
  process(value, { key = null, timestamp = null } = {}) {
    const k = this.keyed ? encode(keyCodec(this.codecs.input), key) : null;
    const v = this.encodeInput(value);
    if (this.windows) return this.windowRecord(k, v, timestamp);
    const b = new OutBatch();
    b.push(k, v, timestamp);
    return this.call(() => this.instance.process(b.bytes(), b.spans, b.timestamps, this.watermark, this.processingTime));
  }

  /** The records sent to side output `name` so far (and forgets them). */
  sideOutput(name) {
    const recs = this.side.get(name) ?? [];
    this.side.delete(name);
    return recs.map((r) => decode(JSON_CODEC, r.value));
  }

  /** The registered timers as [domain, time], in time order. */
  get timers() {
    return [...this.host.timers.values()].sort((a, b) => a.time - b.time).map((t) => [t.domain, t.time]);
  }

  /** Move the watermark; fire due event-time timers and windows. */
  advanceWatermark(watermark) {
    this.watermark = watermark;
    return this.fireDue(TimeDomain.EVENT_TIME, watermark);
  }

  /** Move the processing time; fire due processing-time timers and windows. */
  advanceProcessingTime(time) {
    this.processingTime = time;
    this.host.now = time;
    return this.fireDue(TimeDomain.PROCESSING_TIME, time);
  }

  fireDue(domain, upto) {
    const out = [];
    const w = this.windows;
    if (w) {
      if (w.spec.domain !== domain) return out;
      const due = [...w.open.values()].filter((x) => x.end - 1 <= upto && !w.fired.has(x.id)).sort((a, b) => a.end - b.end || (a.keyId < b.keyId ? -1 : 1));
      for (const x of due) out.push(...this.fireWindow(x));
      for (const x of [...w.open.values()]) {
        if (w.fired.has(x.id) && (domain === TimeDomain.PROCESSING_TIME || this.late(x.end))) {
          w.open.delete(x.id);
          w.fired.delete(x.id);
        }
      }
      return out;
    }
    for (;;) {
      const due = [...this.host.timers.entries()].filter(([, t]) => t.domain === domain && t.time <= upto).sort((a, b) => a[1].time - b[1].time);
      if (due.length === 0) return out;
      const [id, t] = due[0];
      this.host.timers.delete(id);
      out.push(...this.call(() => this.instance.onTimer([t], this.watermark, this.processingTime)));
    }
  }

  late(end) {
    const w = this.windows;
    return w.spec.domain === TimeDomain.EVENT_TIME && this.watermark != null && end - 1 + w.spec.allowedLatenessMs <= this.watermark;
  }

  assign(t) {
    const s = this.windows.spec;
    if (s.kind === 'tumbling') {
      const start = t - (((t % s.sizeMs) + s.sizeMs) % s.sizeMs);
      return [[start, start + s.sizeMs]];
    }
    if (s.kind === 'sliding') {
      const out = [];
      for (let start = t - (((t % s.slideMs) + s.slideMs) % s.slideMs); start > t - s.sizeMs; start -= s.slideMs) out.push([start, start + s.sizeMs]);
      return out.reverse();
    }
    return [[t, t + s.gapMs]];
  }

  fireWindow(x) {
    const w = this.windows;
    const strings = w.aggregate ? [x.contents] : x.contents;
    let total = 0;
    const contentEnds = strings.map((s) => (total += s.length));
    const data = new Uint8Array(total);
    let n = 0;
    for (const s of strings) {
      data.set(s, n);
      n += s.length;
    }
    w.fired.add(x.id);
    return this.call(() => this.instance.fire([{ key: x.key, start: x.start, end: x.end }], data, contentEnds, [strings.length], this.watermark, this.processingTime));
  }

  windowRecord(key, value, timestamp) {
    const w = this.windows;
    let t;
    if (w.spec.domain === TimeDomain.EVENT_TIME) {
      if (timestamp == null) throw new OperatorError('an event-time window needs timestamps: give the source a `timestamp` or a `timestamp-assigner`');
      t = timestamp;
    } else t = this.processingTime;
    const assigned = this.assign(t).filter(([, end]) => !this.late(end));
    if (assigned.length === 0) {
      const late =
        this.codecs.input === ROW
          ? encode(JSON_CODEC, toPlain(this.inputType, read(this.inputType, value), JSON_CODEC))
          : transcode(this.codecs.input, JSON_CODEC, value);
      this.side.set('late', [...(this.side.get('late') ?? []), { key: null, value: late, timestamp }]);
      return [];
    }
    const keyId = keyString(key);
    const out = [];
    for (let [start, end] of assigned) {
      let sources = [];
      if (w.spec.kind === 'session') {
        sources = [...w.open.values()].filter((x) => x.keyId === keyId && x.start <= end && start <= x.end);
        for (const x of sources) {
          start = Math.min(start, x.start);
          end = Math.max(end, x.end);
        }
      } else {
        const same = w.open.get(`${keyId}|${start}|${end}`);
        if (same) sources.push(same);
      }
      const refire = sources.some((x) => w.fired.has(x.id));
      for (const x of sources) {
        w.open.delete(x.id);
        w.fired.delete(x.id);
      }
      let contents;
      if (w.aggregate) {
        const b = new OutBatch();
        b.push(null, value, timestamp);
        [contents] = this.instance.accumulate(b.bytes(), b.spans, b.timestamps, sources.map((x) => x.contents), [sources.length], [0]);
      } else {
        contents = [...sources.flatMap((x) => x.contents), value];
      }
      const x = { id: `${keyId}|${start}|${end}`, keyId, key, start, end, contents };
      w.open.set(x.id, x);
      const onTime = w.spec.domain === TimeDomain.EVENT_TIME && this.watermark != null && end - 1 <= this.watermark;
      if (refire || onTime) out.push(...this.fireWindow(x));
    }
    return out;
  }
}
