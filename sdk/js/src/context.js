// What an operator sees of the runtime: a Context per record, timer or
// window, an OpenContext when it is created.

import { JSON_CODEC, decode, encode } from './codec.js';
import { OutBatch } from './batch.js';
import { ListState, MapState, ValueState } from './state.js';
import { isType } from './types.js';

/** Which clock a timer follows. */
export const TimeDomain = Object.freeze({
  EVENT_TIME: 'event-time',
  PROCESSING_TIME: 'processing-time',
});

/** One window of one key: [start, end) in ms. */
export class Window {
  constructor(key, start, end, codec) {
    /** First instant in the window. */
    this.start = start;
    /** First instant after it. */
    this.end = end;
    this.keyBytes = key;
    this.codec = codec;
  }

  /** The key whose window this is, decoded. */
  get key() {
    return decode(this.codec, this.keyBytes);
  }

  /** The last instant in the window, the timestamp of its results. */
  get maxTimestamp() {
    return this.end - 1;
  }
}

/** The effects of one call, collected in the component and handed over at
 * its end (or early, when an output grows large). */
export class Pending {
  constructor(codecs, watermark, processingTime, handOver) {
    this.codecs = codecs;
    this.timestamp = null;
    this.watermark = watermark;
    this.processingTime = processingTime;
    this.outputs = new OutBatch();
    this.side = new Map();
    this.timerOps = [];
    this.handOver = handOver;
  }

  push(value, key = null) {
    this.pushEncoded(this.codecs.write(value), key, this.timestamp);
  }

  pushEncoded(value, key, timestamp) {
    this.outputs.push(key, value, timestamp);
    if (this.outputs.isLarge()) {
      this.handOver(null, this.outputs);
      this.outputs = new OutBatch();
    }
  }

  pushSide(name, value) {
    const codec = this.codecs.sideOutputs[name] ?? JSON_CODEC;
    let batch = this.side.get(name);
    if (batch === undefined) {
      batch = new OutBatch();
      this.side.set(name, batch);
    }
    batch.push(null, encode(codec, value), this.timestamp);
    if (batch.isLarge()) {
      this.handOver(name, batch);
      this.side.set(name, new OutBatch());
    }
  }
}

/** The runtime as a record, timer or window sees it. */
export class Context {
  constructor(pending, cache) {
    this.pending = pending;
    this.cache = cache;
  }

  /** Send `value` to the main output, with the current timestamp. */
  emit(value) {
    this.pending.push(value);
  }

  /** Send `value` to the main output under `key` (a downstream
   * `key-by = "key"` partitions by it). */
  emitKeyed(key, value) {
    this.pending.push(value, encode(this.pending.codecs.outputKeys, key));
  }

  /** Send `value` to the side output `name` (routed in the manifest with
   * `input = "operator:name"`; dropped when nothing reads it). */
  emitSide(name, value) {
    this.pending.pushSide(name, value);
  }

  /** The record's event time in ms (a timer's time for an event-time timer,
   * `end - 1` for a window), or null. */
  get timestamp() {
    return this.pending.timestamp;
  }

  /** The task's current watermark in ms, or null before the first. */
  get watermark() {
    return this.pending.watermark;
  }

  /** The worker's wall clock, ms since the epoch. */
  get processingTime() {
    return this.pending.processingTime;
  }

  /** The current key, decoded (keyed streams only). */
  get key() {
    if (this.cache.key == null) throw new Error('this operator is not on a keyed stream');
    return decode(this.pending.codecs.inputKeys, this.cache.key);
  }

  /** The current key's bytes, in the input's codec. */
  get keyBytes() {
    return this.cache.key;
  }

  timer(register, domain, time) {
    if (typeof time === 'bigint') time = Number(time);
    if (!Number.isSafeInteger(time)) throw new TypeError(`a timer's time is a whole number of ms, not ${time}`);
    this.cache.current();
    this.pending.timerOps.push({ register, key: this.cache.key, time, domain });
  }

  /** Call `onTimer` for the current key once the watermark reaches `time`. */
  registerEventTimeTimer(time) {
    this.timer(true, TimeDomain.EVENT_TIME, time);
  }

  /** Call `onTimer` for the current key once the wall clock reaches `time`. */
  registerProcessingTimeTimer(time) {
    this.timer(true, TimeDomain.PROCESSING_TIME, time);
  }

  /** Delete the current key's event-time timer at `time`, if any. */
  deleteEventTimeTimer(time) {
    this.timer(false, TimeDomain.EVENT_TIME, time);
  }

  /** Delete the current key's processing-time timer at `time`, if any. */
  deleteProcessingTimeTimer(time) {
    this.timer(false, TimeDomain.PROCESSING_TIME, time);
  }
}

/** What an operator gets when it is created: the job's parameters and the
 * declaration of keyed state. */
export class OpenContext {
  constructor(config, keyed, window, cache) {
    this.config = new Map(config);
    this.keyed = keyed;
    this.cache = cache;
    /** The windows of a window function (null for other operators). */
    this.window = window;
  }

  /** Every parameter of the job (and the runtime's `weir.*` settings). */
  get params() {
    return Object.fromEntries(this.config);
  }

  /** The job parameter `name`, or `fallback`. */
  param(name, fallback = null) {
    return this.config.has(name) ? this.config.get(name) : fallback;
  }

  /** The job parameter `name`, converted with `convert`; an error naming it
   * when it is missing or does not convert (`convert` may throw or return
   * NaN). */
  requiredParam(name, convert = (s) => s) {
    if (!this.config.has(name)) throw new Error(`missing parameter \`${name}\``);
    const raw = this.config.get(name);
    let value;
    try {
      value = convert(raw);
    } catch (e) {
      throw new Error(`parameter \`${name}\` = ${JSON.stringify(raw)}: ${e.message}`);
    }
    if (typeof value === 'number' && Number.isNaN(value)) {
      throw new Error(`parameter \`${name}\` = ${JSON.stringify(raw)} is not a number`);
    }
    return value;
  }

  /** How many times the task was restarted (0 on the first run). */
  get attemptNumber() {
    return Number(this.config.get('weir.attempt') ?? 0) || 0;
  }

  declare(name, kind, options = {}) {
    if (!this.keyed) throw new Error(`state \`${name}\`: keyed state needs a keyed process operator`);
    const { ttlMs = null, refreshOnRead = false, type = null } = options ?? {};
    if (type != null && !isType(type)) {
      throw new Error(`state \`${name}\`: type is a type of weir.types (got ${String(type)})`);
    }
    if (ttlMs == null) return this.cache.declare(name, kind, null, type);
    if (!Number.isSafeInteger(ttlMs) || ttlMs < 1) {
      throw new Error(`state \`${name}\`: ttlMs is a whole number of milliseconds, at least 1 (got ${String(ttlMs)})`);
    }
    return this.cache.declare(name, kind, { ttlMs, refreshOnRead: Boolean(refreshOnRead) }, type);
  }

  /** Declare the value state `name`. With `{ ttlMs }` its value expires that
   * many milliseconds of processing time after it was last written (with
   * `refreshOnRead: true`, also read): an expired value reads as absent and
   * is cleaned out of the state (Flink's state time-to-live). With
   * `{ type }` (a type of `weir.types`) its values are kept as rows of that
   * type, with the type, as Flink's `ValueStateDescriptor` takes a
   * `TypeInformation`: a new version of the operator that declares another
   * type reads what an older one wrote by field name (a field added as
   * `optional` reads null), or is refused naming the field (docs/types.md,
   * "State and schema evolution"). */
  valueState(name, options = {}) {
    return new ValueState(this.cache, this.declare(name, 'value', options));
  }

  /** Declare the list state `name`; with `{ ttlMs }` each element expires on
   * its own, with `{ type }` its elements are rows of it (see `valueState`). */
  listState(name, options = {}) {
    return new ListState(this.cache, this.declare(name, 'list', options));
  }

  /** Declare the map state `name`; with `{ ttlMs }` each entry expires on its
   * own, with `{ type }` its values (not its keys) are rows of it (see
   * `valueState`). */
  mapState(name, options = {}) {
    return new MapState(this.cache, this.declare(name, 'map', options));
  }
}
