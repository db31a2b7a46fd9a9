// The component's side of the contract: the `operators` export over the
// driver, and the host's imports as the driver calls them. Only bundled into
// a component (`weir build`), where `weir:operator/host` exists.
//
// The JS engines lift the contract's numbers differently: QuickJS gives
// numbers and arrays, StarlingMonkey BigInts and typed arrays; both are
// taken, and given back in the engine's own form.

import * as host from 'weir:operator/host@0.4.0';

import { pack, unpack } from './batch.js';
import { Instance, OperatorError, describe } from './driver.js';
import { REGISTRY } from './operators.js';
import { text } from './types.js';

let wide = null;
function isWide() {
  if (wide === null) wide = typeof host.processingTime() === 'bigint';
  return wide;
}
const s64 = (n) => (isWide() ? BigInt(n) : n);
const num = (n) => (n == null ? null : Number(n));
// QuickJS lowers a u32 through an i32: numbers from 2^31 go as their
// negative twins.
const u32s = (a) => (isWide() ? Uint32Array.from(a) : Array.from(a, (n) => n | 0));
const s64s = (a) => (isWide() ? BigInt64Array.from(a, (n) => BigInt(n)) : Array.from(a));

function batch(b) {
  return { data: b.bytes(), spans: u32s(b.spans), timestamps: s64s(b.timestamps) };
}

function packed(p) {
  return { data: p.data, ends: u32s(p.ends) };
}

/** The host's imports, as the driver calls them. */
export const wasmHost = {
  declareState(name, kind) {
    return host.declareState(name, kind);
  },
  declareStateTtl(name, kind, ttlMs, refreshOnRead) {
    return host.declareStateTtl(name, kind, { ttlMs: s64(ttlMs), refreshOnRead });
  },
  declareTypedState(name, kind, ttl, valueType) {
    const t = ttl == null ? undefined : { ttlMs: s64(ttl.ttlMs), refreshOnRead: ttl.refreshOnRead };
    return host.declareTypedState(name, kind, t, valueType);
  },
  getValues(states, keys) {
    const [answer, present] = host.getValues(u32s(states), packed(pack(keys)));
    const strings = unpack(answer.data, Array.from(answer.ends));
    return strings.map((s, i) => (present[i] ? s : null));
  },
  getList(state, key) {
    return host.getList({ state, key });
  },
  getEntry(state, key, mapKey) {
    return host.getEntry({ state, key }, mapKey) ?? null;
  },
  getEntries(state, key) {
    return host.getEntries({ state, key });
  },
  emit(b) {
    host.emit(batch(b));
  },
  emitSide(name, b) {
    host.emitSide(name, batch(b));
  },
  putValues(state, keys, values) {
    host.putValues(state, packed(keys), packed(values));
  },
  updateState(ops) {
    host.updateState(
      ops.map((o) => {
        const target = { state: o.state, key: o.key };
        switch (o.op) {
          case 'clear':
            return { tag: 'clear', val: target };
          case 'append-list':
            return { tag: 'append-list', val: { target, values: o.values } };
          case 'replace-list':
            return { tag: 'replace-list', val: { target, values: o.values } };
          case 'put-entry':
            return { tag: 'put-entry', val: { target, mapKey: o.mapKey, value: o.value } };
          default:
            return { tag: 'remove-entry', val: { target, mapKey: o.mapKey } };
        }
      }),
    );
  },
  updateTimers(ops) {
    host.updateTimers(
      ops.map((o) => ({ tag: o.register ? 'register' : 'delete', val: { key: o.key, time: s64(o.time), domain: o.domain } })),
    );
  },
  log(level, message) {
    host.log(level, message);
  },
};

// `weir.log` writes through the host inside a component.
globalThis.__weirLog = wasmHost.log;

function windowSpec(spec) {
  if (spec == null) return null;
  const a = spec.assigner;
  const out = { kind: a.tag, sizeMs: null, slideMs: null, gapMs: null, domain: spec.domain, allowedLatenessMs: num(spec.allowedLatenessMs) };
  if (a.tag === 'tumbling') out.sizeMs = num(a.val);
  else if (a.tag === 'sliding') {
    out.sizeMs = num(a.val.sizeMs);
    out.slideMs = num(a.val.slideMs);
  } else out.gapMs = num(a.val);
  return out;
}

function failed(name, e) {
  return e instanceof OperatorError ? e.message : describe(name, e);
}

class Operator {
  static create(name, config, window, codecs) {
    const c = {
      input: codecs.input,
      output: codecs.output,
      sideOutputs: Object.fromEntries(codecs.sideOutputs),
      state: codecs.state,
    };
    const op = new Operator();
    try {
      op.instance = new Instance(name, config, windowSpec(window), c, wasmHost);
    } catch (e) {
      throw failed(name, e);
    }
    return op;
  }

  process(records, ctx) {
    const i = this.instance;
    try {
      i.process(records.data, records.spans, records.timestamps, num(ctx.watermark), num(ctx.processingTime));
    } catch (e) {
      throw failed(i.name, e);
    }
  }

  onTimer(timers, ctx) {
    const i = this.instance;
    try {
      i.onTimer(
        timers.map((t) => ({ key: t.key, time: Number(t.time), domain: t.domain })),
        num(ctx.watermark),
        num(ctx.processingTime),
      );
    } catch (e) {
      throw failed(i.name, e);
    }
  }

  accumulate(records, accumulators, groups, targets) {
    const i = this.instance;
    try {
      const accs = unpack(accumulators.data, Array.from(accumulators.ends));
      const out = i.accumulate(records.data, records.spans, records.timestamps, accs, Array.from(groups), Array.from(targets));
      return packed(pack(out));
    } catch (e) {
      throw failed(i.name, e);
    }
  }

  fire(windows, contents, ends, ctx) {
    const i = this.instance;
    try {
      i.fire(
        windows.map((w) => ({ key: w.key, start: Number(w.start), end: Number(w.end) })),
        contents.data,
        Array.from(contents.ends),
        Array.from(ends),
        num(ctx.watermark),
        num(ctx.processingTime),
      );
    } catch (e) {
      throw failed(i.name, e);
    }
  }
}

/** The `operators` export: what this component offers. */
export const operators = {
  listOperators() {
    // Declared types in the type syntax; an untyped operator's records are
    // JSON or MessagePack, never rows.
    return [...REGISTRY.values()].map((e) => ({
      name: e.name,
      kind: e.kind,
      inputType: e.inputType == null ? undefined : text(e.inputType),
      outputType: e.outputType == null ? undefined : text(e.outputType),
    }));
  },
  Operator,
};
