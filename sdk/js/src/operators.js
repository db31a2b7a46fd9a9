// Operators: the functions that register them by name, and how each kind
// handles records, timers and windows.

import { decode, encode, shown } from './codec.js';
import { isType } from './types.js';

/** The operators of this component, by name, in registration order. */
export const REGISTRY = new Map();

function checkName(kind, name) {
  if (typeof name !== 'string' || name === '') {
    throw new TypeError(`weir.${kind} needs the operator's name first, as the manifest's \`function\` says it`);
  }
}

const isWindow = (contract) => contract === 'window' || contract === 'window-process';

const passesThrough = (contract) => contract === 'filter' || contract === 'timestamp-assigner';

function declared(name, what, t) {
  if (t == null) return null;
  if (!isType(t)) throw new TypeError(`operator \`${name}\`: its ${what} type is not a Weir type (weir.types)`);
  return t;
}

function register(kind, contract, name, target, make, types = {}) {
  checkName(kind, name);
  if (types == null || typeof types !== 'object') {
    throw new TypeError(`weir.${kind}(${JSON.stringify(name)}, ..., types): types is { input, output }`);
  }
  const inputType = declared(name, 'input', types.input);
  const outputType = declared(name, 'output', types.output);
  if (passesThrough(contract) && outputType != null) {
    throw new TypeError(`operator \`${name}\` passes its records on: it declares no output type`);
  }
  if (REGISTRY.has(name)) throw new Error(`two operators are named \`${name}\``);
  REGISTRY.set(name, {
    name,
    kind: contract,
    target,
    make,
    keyed: contract === 'keyed-process',
    window: isWindow(contract),
    inputType,
    outputType,
    // What it writes: a filter's and a timestamp assigner's input.
    writes: passesThrough(contract) ? inputType : outputType,
  });
  return target;
}

function weirSdkEmitAll(outputs, pending) {
  if (outputs == null) return;
  if (typeof outputs === 'string' || typeof outputs[Symbol.iterator] !== 'function') {
    throw new TypeError(`an operator returned ${typeof outputs === 'string' ? 'a string' : 'a non-iterable'}: return (or yield) an iterable of outputs, or nothing`);
  }
  for (const out of outputs) pending.push(out);
}

function fn(kind, contract, handler) {
  return (name, f, types) => {
    checkName(kind, name);
    if (typeof f !== 'function') throw new TypeError(`weir.${kind}(${JSON.stringify(name)}, f) needs a function`);
    return register(kind, contract, name, f, () => handler(f), types);
  };
}

function cls(kind, contract, required, handler) {
  return (name, Cls, types) => {
    checkName(kind, name);
    if (typeof Cls !== 'function' || typeof Cls.prototype?.[required] !== 'function') {
      throw new TypeError(`weir.${kind}(${JSON.stringify(name)}, Class) needs a class with a \`${required}\` method`);
    }
    return register(kind, contract, name, Cls, (ctx) => {
      if (isWindow(contract) && ctx.window == null) {
        throw new Error('this is a window function, but the job gives it no `window` in its manifest');
      }
      const op = new Cls();
      if (typeof op.open === 'function') op.open(ctx);
      return handler(op);
    }, types);
  };
}

const mapHandler = (f) => ({
  weirSdkRecord(value, pending) {
    pending.push(f(pending.codecs.read(value)));
  },
});

const flatMapHandler = (f) => ({
  weirSdkRecord(value, pending) {
    weirSdkEmitAll(f(pending.codecs.read(value)), pending);
  },
});

const filterHandler = (f) => ({
  weirSdkRecord(value, pending) {
    if (f(pending.codecs.read(value))) {
      pending.pushEncoded(pending.codecs.transcode(value), null, pending.timestamp);
    }
  },
});

const timestampsHandler = (f) => ({
  weirSdkRecord(value, pending) {
    let t = f(pending.codecs.read(value));
    if (typeof t === 'bigint') t = Number(t);
    if (!Number.isSafeInteger(t)) {
      throw new TypeError(`a timestamp assigner returned ${shown(t)}: a whole number of ms is needed`);
    }
    pending.pushEncoded(pending.codecs.transcode(value), null, t);
  },
});

const processHandler = (op) => ({
  weirSdkRecord(value, pending, ctx) {
    weirSdkEmitAll(op.process(pending.codecs.read(value), ctx), pending);
  },
  weirSdkTimer(time, domain, pending, ctx) {
    if (typeof op.onTimer === 'function') weirSdkEmitAll(op.onTimer(time, domain, ctx), pending);
  },
});

const aggregateHandler = (op) => {
  const merged = (stored, codec) => {
    if (stored.length === 0) return op.createAccumulator();
    let acc = decode(codec, stored[0]);
    for (let i = 1; i < stored.length; i++) acc = op.merge(acc, decode(codec, stored[i]));
    return acc;
  };
  return {
    weirSdkAccumulate(records, accumulators, groups, targets, read, state) {
      const accs = [];
      let start = 0;
      for (const end of groups) {
        if (end < start || end > accumulators.length) throw new Error("a group's accumulators are outside the call's");
        accs.push(merged(accumulators.slice(start, end), state));
        start = end;
      }
      records.forEach((record, i) => {
        const g = targets[i];
        if (g >= accs.length) throw new Error("a record's group is outside the call's");
        accs[g] = op.add(read(record), accs[g]);
      });
      return accs.map((acc) => encode(state, acc));
    },
    weirSdkFire(window, contents, pending) {
      pending.push(op.getResult(merged(contents, pending.codecs.state), window));
    },
  };
};

const processWindowHandler = (op) => ({
  weirSdkFire(window, contents, pending) {
    const read = pending.codecs.read;
    weirSdkEmitAll(op.process(window, contents.map((c) => read(c))), pending);
  },
});

/** A map: `f(value)` is the one output of each record. */
export const map = fn('map', 'map', mapHandler);
/** A flat map: `f(value)` returns (or yields) the outputs of each record. */
export const flatMap = fn('flatMap', 'flat-map', flatMapHandler);
/** A filter: keeps the records for which `f(value)` is true. */
export const filter = fn('filter', 'filter', filterHandler);
/** A timestamp assigner: `f(value)` is the record's event time, ms. */
export const timestamps = fn('timestamps', 'timestamp-assigner', timestampsHandler);
/** A stateless operator with set-up: a class with `process(value, ctx)` and
 * optionally `open(ctx)`. */
export const process = cls('process', 'flat-map', 'process', processHandler);
/** A keyed process function: a class with `process(value, ctx)`, optionally
 * `open(ctx)` (declare state there) and `onTimer(time, domain, ctx)`. */
export const keyedProcess = cls('keyedProcess', 'keyed-process', 'process', processHandler);
/** A window aggregate: a class with `createAccumulator()`, `add(value, acc)`,
 * `merge(a, b)` and `getResult(acc, window)`. */
export const windowAggregate = cls('windowAggregate', 'window', 'getResult', aggregateHandler);
/** A process-window function: a class with `process(window, elements)`
 * returning (or yielding) the window's results. */
export const windowProcess = cls('windowProcess', 'window-process', 'process', processWindowHandler);
