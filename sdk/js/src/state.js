// Keyed state handles and the per-batch state cache. Within a batch, entries
// live in a cache inside the component: the value states of all the batch's
// keys are fetched in one host call when it starts, other reads happen on
// first use, and the batch's changes go to the host in one call each at its
// end.

import { decode, encode } from './codec.js';
import { keyString, pack } from './batch.js';
import { ROW, reader, writer } from './rows.js';
import { text } from './types.js';

/** Keyed state used where there is none. */
export class StateError extends Error {
  constructor(message) {
    super(message);
    this.name = 'StateError';
  }
}

const RAW = 0;
const DECODED = 1;

/** The state of one operator instance, as one batch sees it. */
export class StateCache {
  constructor(host, codec) {
    this.host = host;
    this.codec = codec;
    /** The current key's bytes, and as a Map key. */
    this.key = null;
    this.keyId = null;
    this.valueIds = [];
    // Per value state: keyId -> {kind: RAW, raw} or {kind: DECODED, value, dirty, key}
    this.values = [];
    this.listIds = [];
    // Per list state: keyId -> {known, items, stored, key}
    this.lists = [];
    this.mapIds = [];
    // Per map state: keyId -> {cleared, changes: Map, reads: Map, key}
    this.maps = [];
    // Per value, list and map state: how its values (a map's values, not
    // its keys) are read and written: in the codec, or as rows of the type
    // it was declared with.
    this.valueCoders = [];
    this.listCoders = [];
    this.mapCoders = [];
  }

  declare(name, kind, ttl = null, type = null) {
    let id;
    let coder;
    if (type != null) {
      id = this.host.declareTypedState(name, kind, ttl, text(type));
      coder = { decode: reader(ROW, type), encode: writer(ROW, type) };
    } else {
      id = ttl == null ? this.host.declareState(name, kind) : this.host.declareStateTtl(name, kind, ttl.ttlMs, ttl.refreshOnRead);
      const codec = this.codec;
      coder = { decode: (b) => decode(codec, b), encode: (v) => encode(codec, v) };
    }
    const [ids, slots, coders] =
      kind === 'value'
        ? [this.valueIds, this.values, this.valueCoders]
        : kind === 'list'
          ? [this.listIds, this.lists, this.listCoders]
          : [this.mapIds, this.maps, this.mapCoders];
    ids.push(id);
    slots.push(new Map());
    coders.push(coder);
    return slots.length - 1;
  }

  setKey(key) {
    this.key = key;
    this.keyId = key == null ? null : keyString(key);
  }

  current() {
    if (this.key == null) {
      throw new StateError('keyed state is only available in a keyed process operator, while it handles a record or timer');
    }
    return this.keyId;
  }

  /** Fetch the value states of `keys` in one host call. */
  prefetch(keys) {
    if (this.valueIds.length === 0 || keys.length === 0) return;
    const seen = new Map();
    for (const k of keys) {
      const id = keyString(k);
      if (!seen.has(id)) seen.set(id, k);
    }
    const ids = [...seen.keys()];
    const wanted = [...seen.values()];
    const answers = this.host.getValues(this.valueIds, wanted);
    const per = this.valueIds.length;
    answers.forEach((raw, i) => {
      const slots = this.values[i % per];
      const id = ids[Math.floor(i / per)];
      if (!slots.has(id)) slots.set(id, { kind: RAW, raw, key: wanted[Math.floor(i / per)] });
    });
  }

  /** Drain the batch's changes: value puts packed per state, and the
   * other changes in order. */
  take() {
    const puts = [];
    const ops = [];
    this.values.forEach((slots, s) => {
      const state = this.valueIds[s];
      const keys = [];
      const values = [];
      for (const slot of slots.values()) {
        if (slot.kind !== DECODED || !slot.dirty) continue;
        if (slot.value == null) ops.push({ op: 'clear', state, key: slot.key });
        else {
          keys.push(slot.key);
          values.push(this.valueCoders[s].encode(slot.value));
        }
      }
      slots.clear();
      if (keys.length) puts.push({ state, keys: pack(keys), values: pack(values) });
    });
    this.lists.forEach((slots, s) => {
      const state = this.listIds[s];
      for (const slot of slots.values()) {
        // What was only added is appended: the host keeps what it holds
        // as it is (a time-to-live's expiry times too). `stored`: how many
        // leading items the host holds, null when the list was replaced.
        if (!slot.known) {
          if (slot.items.length) ops.push({ op: 'append-list', state, key: slot.key, values: slot.items });
        } else if (slot.stored === null) {
          ops.push(slot.items.length ? { op: 'replace-list', state, key: slot.key, values: slot.items } : { op: 'clear', state, key: slot.key });
        } else if (slot.items.length > slot.stored) {
          ops.push({ op: 'append-list', state, key: slot.key, values: slot.items.slice(slot.stored) });
        }
      }
      slots.clear();
    });
    this.maps.forEach((slots, s) => {
      const state = this.mapIds[s];
      for (const slot of slots.values()) {
        if (slot.cleared) ops.push({ op: 'clear', state, key: slot.key });
        const changes = [...slot.changes.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
        for (const [, [mapKey, value]] of changes) {
          ops.push(value == null ? { op: 'remove-entry', state, key: slot.key, mapKey } : { op: 'put-entry', state, key: slot.key, mapKey, value });
        }
      }
      slots.clear();
    });
    return { puts, ops };
  }

  /** Drop the batch's cached entries and changes (the batch failed). */
  discard() {
    for (const group of [this.values, this.lists, this.maps]) for (const slots of group) slots.clear();
    this.setKey(null);
  }
}

/** One value per key, like Flink's ValueState. The object `value()` returns
 * is the cached one: after changing it in place, call `update` with it. */
export class ValueState {
  constructor(cache, slot) {
    this.cache = cache;
    this.slot = slot;
  }

  entry() {
    const c = this.cache;
    const id = c.current();
    const slots = c.values[this.slot];
    let e = slots.get(id);
    if (e === undefined) {
      const raw = c.host.getValues([c.valueIds[this.slot]], [c.key])[0];
      e = { kind: RAW, raw, key: c.key };
      slots.set(id, e);
    }
    if (e.kind === RAW) {
      e.value = e.raw == null ? null : c.valueCoders[this.slot].decode(e.raw);
      e.kind = DECODED;
      e.dirty = false;
      e.raw = null;
    }
    return e;
  }

  /** The current key's value, or null when it has none. */
  value() {
    return this.entry().value;
  }

  /** Set the current key's value (null clears it). */
  update(value) {
    const c = this.cache;
    // Encoded once, when the batch ends.
    c.values[this.slot].set(c.current(), { kind: DECODED, value: value ?? null, dirty: true, key: c.key });
  }

  /** Remove the current key's value. */
  clear() {
    this.update(null);
  }
}

/** A list of values per key, like Flink's ListState. */
export class ListState {
  constructor(cache, slot) {
    this.cache = cache;
    this.slot = slot;
  }

  known() {
    const c = this.cache;
    const id = c.current();
    const slots = c.lists[this.slot];
    let slot = slots.get(id);
    if (slot === undefined || !slot.known) {
      const stored = c.host.getList(c.listIds[this.slot], c.key);
      const appended = slot ? slot.items : [];
      slot = { known: true, items: [...stored, ...appended], stored: stored.length, key: c.key };
      slots.set(id, slot);
    }
    return slot;
  }

  /** The current key's values, oldest first. */
  get() {
    const { decode: read } = this.cache.listCoders[this.slot];
    return this.known().items.map((v) => read(v));
  }

  /** Add `value` at the end of the current key's list. */
  add(value) {
    this.addAll([value]);
  }

  /** Add `values` at the end of the current key's list. */
  addAll(values) {
    const c = this.cache;
    const id = c.current();
    const { encode: write } = c.listCoders[this.slot];
    const encoded = values.map((v) => write(v));
    const slots = c.lists[this.slot];
    const slot = slots.get(id);
    if (slot === undefined) slots.set(id, { known: false, items: encoded, stored: null, key: c.key });
    else slot.items.push(...encoded);
  }

  /** Replace the current key's list with `values`. */
  update(values) {
    const c = this.cache;
    const id = c.current();
    const { encode: write } = c.listCoders[this.slot];
    c.lists[this.slot].set(id, { known: true, items: values.map((v) => write(v)), stored: null, key: c.key });
  }

  /** Remove the current key's list. */
  clear() {
    this.update([]);
  }
}

/** A map from user keys to values per key, like Flink's MapState; entries
 * are ordered by their encoded user keys. */
export class MapState {
  constructor(cache, slot) {
    this.cache = cache;
    this.slot = slot;
  }

  slotOf() {
    const c = this.cache;
    const id = c.current();
    const slots = c.maps[this.slot];
    let slot = slots.get(id);
    if (slot === undefined) {
      slot = { cleared: false, changes: new Map(), reads: new Map(), key: c.key };
      slots.set(id, slot);
    }
    return slot;
  }

  raw(mapKey) {
    const c = this.cache;
    const slot = this.slotOf();
    const mk = encode(c.codec, mapKey);
    const id = keyString(mk);
    if (slot.changes.has(id)) return slot.changes.get(id)[1];
    if (slot.cleared) return null;
    if (!slot.reads.has(id)) slot.reads.set(id, c.host.getEntry(c.mapIds[this.slot], c.key, mk) ?? null);
    return slot.reads.get(id);
  }

  /** The value under `mapKey`, or `fallback` (null) when there is none. */
  get(mapKey, fallback = null) {
    const raw = this.raw(mapKey);
    return raw == null ? fallback : this.cache.mapCoders[this.slot].decode(raw);
  }

  /** Whether `mapKey` has a value. */
  contains(mapKey) {
    return this.raw(mapKey) != null;
  }

  /** Set the value under `mapKey`. */
  put(mapKey, value) {
    const codec = this.cache.codec;
    const mk = encode(codec, mapKey);
    this.slotOf().changes.set(keyString(mk), [mk, this.cache.mapCoders[this.slot].encode(value)]);
  }

  /** Set every entry of `entries` (an object or a Map). */
  putAll(entries) {
    const items = entries instanceof Map ? entries.entries() : Object.entries(entries);
    for (const [k, v] of items) this.put(k, v);
  }

  /** Remove the entry under `mapKey`. */
  remove(mapKey) {
    const mk = encode(this.cache.codec, mapKey);
    this.slotOf().changes.set(keyString(mk), [mk, null]);
  }

  rawEntries() {
    const c = this.cache;
    const slot = this.slotOf();
    const merged = new Map();
    if (!slot.cleared) {
      for (const [k, v] of c.host.getEntries(c.mapIds[this.slot], c.key)) merged.set(keyString(k), [k, v]);
    }
    for (const [id, change] of slot.changes) merged.set(id, change);
    return [...merged.entries()]
      .filter(([, [, v]]) => v != null)
      .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([, kv]) => kv);
  }

  /** Every [userKey, value] of the current key's map. */
  entries() {
    const codec = this.cache.codec;
    const { decode: read } = this.cache.mapCoders[this.slot];
    return this.rawEntries().map(([k, v]) => [decode(codec, k), read(v)]);
  }

  /** Every user key of the current key's map. */
  keys() {
    return this.entries().map(([k]) => k);
  }

  /** Every value of the current key's map. */
  values() {
    return this.entries().map(([, v]) => v);
  }

  /** Whether the current key's map has no entries. */
  isEmpty() {
    return this.rawEntries().length === 0;
  }

  /** Remove every entry of the current key's map. */
  clear() {
    const slot = this.slotOf();
    slot.cleared = true;
    slot.changes.clear();
    slot.reads.clear();
  }
}
