// Weir operators in JavaScript.
//
// Register a job's operators by name (the name a manifest's `function` uses)
// with a function per kind; `weir build` bundles the module and turns it into
// a WebAssembly component that Weir's workers run beside operators written in
// Rust or Python. Records are plain JS values (null, booleans, numbers,
// strings, arrays, objects; Uint8Array for bytes), encoded as the other SDKs
// encode them, so records and state written in one language read in
// another; an operator that declares its types (`weir.map(name, f,
// { input, output })` with `weir.types`) reads and writes rows beside
// operators of the same types. `weir/testing` runs an operator under
// `node --test`.

export { CodecError, decode, encode } from './codec.js';
export { Context, OpenContext, TimeDomain, Window } from './context.js';
export { OperatorError } from './driver.js';
export { filter, flatMap, keyedProcess, map, process, timestamps, windowAggregate, windowProcess } from './operators.js';
export { ListState, MapState, ValueState } from './state.js';
import * as types from './types.js';
/** Record types for `{ input, output }` (`types.record({ id: types.u64 })`). */
export { types };

const LEVELS = ['debug', 'info', 'warn', 'error'];

/** Write a line to the task's log (the worker's log, tagged with the job,
 * operator and subtask): `level` is 'debug', 'info', 'warn' or 'error'.
 * Outside a component the line goes to stderr. */
export function log(level, message) {
  if (!LEVELS.includes(level)) throw new Error(`log level ${JSON.stringify(level)}: expected one of ${LEVELS.join(', ')}`);
  const sink = globalThis.__weirLog;
  if (typeof sink === 'function') sink(level, String(message));
  else console.error(`[${level}] ${message}`);
}
