// Runs an operator over a call: decodes records, keeps the current key,
// serves state from the cache, collects the call's effects and hands them to
// the host. The same code runs in the component and in `weir/testing`; only
// the host differs.

import { records as readRecords, unpack } from './batch.js';
import { Context, OpenContext, Pending, TimeDomain, Window } from './context.js';
import { REGISTRY } from './operators.js';
import { typedCodecs } from './rows.js';
import { StateCache } from './state.js';

/** At most this much of a stack goes into a task's error. */
const MAX_ERROR = 4000;

/** An operator failed: the message names it and carries the stack. */
export class OperatorError extends Error {
  constructor(message) {
    super(message);
    this.name = 'OperatorError';
  }
}

/** `operator \`name\`: Type: message` and the stack of the error. */
export function describe(name, e, prefix = `operator \`${name}\`:`) {
  if (e instanceof OperatorError) return e.message;
  let text;
  if (e instanceof Error) {
    text = `${prefix} ${e.name}: ${e.message}`;
    const frames = [];
    // V8 starts its stack with the message; QuickJS with the frames. The
    // operator's own frames are those above the SDK's first.
    for (const line of (typeof e.stack === 'string' ? e.stack : '').split('\n')) {
      const frame = line.trim();
      if (!frame.startsWith('at ')) continue;
      if (/^at (\S+\.)?weirSdk/.test(frame)) break;
      // In a component, the code is the bundle `weir build` keeps.
      frames.push(`    ${frame.replace('(/bundle.js:', '(.weir/bundle.js:')}`);
    }
    if (frames.length) text += `\n${frames.join('\n')}`;
  } else {
    // What is thrown may be anything, JSON.stringify may throw on it (a
    // BigInt, a cycle): the error is never lost to its description.
    let json;
    try {
      json = JSON.stringify(e);
    } catch {
      json = undefined;
    }
    text = `${prefix} ${typeof e === 'string' ? e : json ?? String(e)}`;
  }
  return text.length > MAX_ERROR ? text.slice(0, MAX_ERROR - 3) + '...' : text;
}

/** One created operator of one subtask, with its own state cache. */
export class Instance {
  constructor(name, config, window, codecs, host) {
    const entry = REGISTRY.get(name);
    if (entry === undefined) {
      throw new OperatorError(`no operator named \`${name}\` in this component (it has: ${[...REGISTRY.keys()].join(', ')})`);
    }
    this.name = name;
    this.keyed = entry.keyed;
    this.codecs = typedCodecs(codecs, entry.inputType, entry.writes);
    this.host = host;
    this.cache = new StateCache(host, codecs.state);
    const ctx = new OpenContext(config, entry.keyed, window, this.cache);
    try {
      this.handler = entry.make(ctx);
    } catch (e) {
      throw new OperatorError(describe(name, e, `operator \`${name}\` failed to open:`));
    }
  }

  run(items, watermark, processingTime, each) {
    const handOver = (side, batch) => (side == null ? this.host.emit(batch) : this.host.emitSide(side, batch));
    const pending = new Pending(this.codecs, watermark, processingTime, handOver);
    const ctx = new Context(pending, this.cache);
    let changes;
    try {
      for (const item of items) each(item, pending, ctx);
      this.cache.setKey(null);
      changes = this.cache.take();
    } catch (e) {
      this.cache.discard();
      throw new OperatorError(describe(this.name, e));
    }
    const { puts, ops } = changes;
    const host = this.host;
    if (pending.outputs.length) host.emit(pending.outputs);
    for (const [name, batch] of pending.side) if (batch.length) host.emitSide(name, batch);
    for (const p of puts) host.putValues(p.state, p.keys, p.values);
    if (ops.length) host.updateState(ops);
    if (pending.timerOps.length) host.updateTimers(pending.timerOps);
  }

  /** Handle a batch of records. */
  process(data, spans, timestamps, watermark, processingTime) {
    const records = readRecords(data, spans, timestamps);
    const cache = this.cache;
    if (this.keyed) {
      records.forEach((r, i) => {
        if (r.key == null) {
          throw new OperatorError(`operator \`${this.name}\` is a keyed process but record ${i} of the batch has no key (use key-by in the manifest)`);
        }
      });
      cache.prefetch(records.map((r) => r.key));
    }
    const handler = this.handler;
    if (typeof handler.weirSdkRecord !== 'function') {
      throw new OperatorError(`operator \`${this.name}\` is a window function: it is called by the window operator, not per record`);
    }
    this.run(records, watermark, processingTime, (r, pending, ctx) => {
      pending.timestamp = r.timestamp;
      cache.setKey(r.key);
      handler.weirSdkRecord(r.value, pending, ctx);
    });
  }

  /** Handle fired timers ({key, time, domain}), in order. */
  onTimer(timers, watermark, processingTime) {
    const cache = this.cache;
    if (this.keyed) cache.prefetch(timers.map((t) => t.key));
    const handler = this.handler;
    this.run(timers, watermark, processingTime, (t, pending, ctx) => {
      pending.timestamp = t.domain === TimeDomain.EVENT_TIME ? t.time : null;
      cache.setKey(t.key);
      if (typeof handler.weirSdkTimer === 'function') handler.weirSdkTimer(t.time, t.domain, pending, ctx);
    });
  }

  /** Fold records into accumulators (a window aggregate). */
  accumulate(data, spans, timestamps, accumulators, groups, targets) {
    const values = readRecords(data, spans, timestamps).map((r) => r.value);
    if (targets.length !== values.length) {
      throw new OperatorError(`accumulate: ${targets.length} targets for ${values.length} records`);
    }
    if (typeof this.handler.weirSdkAccumulate !== 'function') throw new OperatorError(`operator \`${this.name}\` is not a window aggregate`);
    try {
      return this.handler.weirSdkAccumulate(values, accumulators, groups, targets, this.codecs.read, this.codecs.state);
    } catch (e) {
      throw new OperatorError(describe(this.name, e));
    }
  }

  /** Windows ({key, start, end}) fire; window `w`'s contents are the packed
   * strings `ends[w - 1] .. ends[w]`. */
  fire(windows, contents, contentEnds, ends, watermark, processingTime) {
    if (ends.length !== windows.length) throw new OperatorError(`fire: ${ends.length} content ranges for ${windows.length} windows`);
    if (typeof this.handler.weirSdkFire !== 'function') throw new OperatorError(`operator \`${this.name}\` is not a window function`);
    const strings = unpack(contents, contentEnds);
    const items = [];
    let start = 0;
    windows.forEach((w, i) => {
      const end = ends[i];
      if (end < start || end > strings.length) throw new OperatorError("a window's contents are outside the call's");
      items.push([new Window(w.key, w.start, w.end, this.codecs.inputKeys), strings.slice(start, end)]);
      start = end;
    });
    const handler = this.handler;
    this.run(items, watermark, processingTime, ([window, strings], pending, ctx) => {
      pending.timestamp = window.end - 1;
      handler.weirSdkFire(window, strings, pending, ctx);
    });
  }
}
