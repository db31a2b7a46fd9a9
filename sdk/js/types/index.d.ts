// Types of the Weir JavaScript SDK.

/** A value the codecs can say: what records, keys and state hold. */
export type Value = null | boolean | number | string | Uint8Array | Value[] | { [field: string]: Value };

/** Which clock a timer follows. */
export type TimeDomainName = 'event-time' | 'processing-time';
export declare const TimeDomain: { readonly EVENT_TIME: 'event-time'; readonly PROCESSING_TIME: 'processing-time' };

/** One window of one key: [start, end) in ms. */
export declare class Window {
  /** First instant in the window. */
  readonly start: number;
  /** First instant after it. */
  readonly end: number;
  /** The key's bytes, in the window operator's input codec. */
  readonly keyBytes: Uint8Array;
  /** The key, decoded. */
  readonly key: any;
  /** The last instant in the window, the timestamp of its results. */
  readonly maxTimestamp: number;
}

/** The windows a job's manifest gives a window function. */
export interface WindowSpec {
  kind: 'tumbling' | 'sliding' | 'session';
  sizeMs: number | null;
  slideMs: number | null;
  gapMs: number | null;
  domain: TimeDomainName;
  allowedLatenessMs: number;
}

/** The runtime as a record, timer or window sees it. */
export declare class Context<Out = any> {
  /** Send `value` to the main output, with the current timestamp. */
  emit(value: Out): void;
  /** Send `value` to the main output under `key`. */
  emitKeyed(key: Value, value: Out): void;
  /** Send `value` to the side output `name`. */
  emitSide(name: string, value: Value): void;
  /** The record's event time in ms, or null. */
  readonly timestamp: number | null;
  /** The task's watermark in ms, or null before the first. */
  readonly watermark: number | null;
  /** The worker's wall clock, ms since the epoch. */
  readonly processingTime: number;
  /** The current key, decoded. */
  readonly key: any;
  /** The current key's bytes. */
  readonly keyBytes: Uint8Array | null;
  registerEventTimeTimer(time: number): void;
  registerProcessingTimeTimer(time: number): void;
  deleteEventTimeTimer(time: number): void;
  deleteProcessingTimeTimer(time: number): void;
}

/** One value per key. */
export declare class ValueState<T = any> {
  value(): T | null;
  update(value: T | null): void;
  clear(): void;
}

/** A list of values per key. */
export declare class ListState<T = any> {
  get(): T[];
  add(value: T): void;
  addAll(values: T[]): void;
  update(values: T[]): void;
  clear(): void;
}

/** A map from user keys to values per key. */
export declare class MapState<K = any, V = any> {
  get(mapKey: K): V | null;
  get<D>(mapKey: K, fallback: D): V | D;
  contains(mapKey: K): boolean;
  put(mapKey: K, value: V): void;
  putAll(entries: Record<string, V> | Map<K, V>): void;
  remove(mapKey: K): void;
  entries(): [K, V][];
  keys(): K[];
  values(): V[];
  isEmpty(): boolean;
  clear(): void;
}

/** A keyed state's time-to-live (Flink's `StateTtlConfig`) and the type of
 * its values. */
export interface StateOptions<T = any> {
  /** Milliseconds of processing time a value lives after its last write (at least 1). */
  ttlMs?: number;
  /** Whether a read that finds a value alive renews it too. */
  refreshOnRead?: boolean;
  /** Keep the values (a map's values) as rows of this type, with the type. */
  type?: Type<T>;
}

/** What an operator gets when it is created. */
export declare class OpenContext {
  /** Every parameter of the job, by name. */
  readonly params: Record<string, string>;
  /** How many times the task was restarted. */
  readonly attemptNumber: number;
  /** A window function's windows, or null. */
  readonly window: WindowSpec | null;
  param(name: string, fallback?: string | null): string | null;
  requiredParam<T = string>(name: string, convert?: (raw: string) => T): T;
  valueState<T = any>(name: string, options?: StateOptions<T>): ValueState<T>;
  listState<T = any>(name: string, options?: StateOptions<T>): ListState<T>;
  mapState<K = any, V = any>(name: string, options?: StateOptions<V>): MapState<K, V>;
}

type Outputs<Out> = Iterable<Out> | void | null | undefined;

export interface ProcessFunction<In = any, Out = any> {
  open?(ctx: OpenContext): void;
  process(value: In, ctx: Context<Out>): Outputs<Out>;
}

export interface KeyedProcessFunction<In = any, Out = any> extends ProcessFunction<In, Out> {
  onTimer?(time: number, domain: TimeDomainName, ctx: Context<Out>): Outputs<Out>;
}

export interface AggregateFunction<In = any, Acc = any, Out = any> {
  open?(ctx: OpenContext): void;
  createAccumulator(): Acc;
  add(value: In, accumulator: Acc): Acc;
  merge(a: Acc, b: Acc): Acc;
  getResult(accumulator: Acc, window: Window): Out;
}

export interface ProcessWindowFunction<In = any, Out = any> {
  open?(ctx: OpenContext): void;
  process(window: Window, elements: In[]): Outputs<Out>;
}

/** A record type (`weir.types`). */
export interface Type<T = any> {
  readonly kind: string;
  /** The values it describes (for inference only). */
  readonly __value?: T;
}
/** The value of a `Type`. */
export type ValueOf<T> = T extends Type<infer V> ? V : any;

/** Record types, for an operator's `{ input, output }`. */
export declare namespace types {
  const bool: Type<boolean>;
  const i8: Type<number>;
  const i16: Type<number>;
  const i32: Type<number>;
  /** A number, or a BigInt beyond 2^53 − 1 in magnitude (which a number cannot hold exactly). */
  const i64: Type<number | bigint>;
  const u8: Type<number>;
  const u16: Type<number>;
  const u32: Type<number>;
  /** A number, or a BigInt beyond 2^53 − 1 (which a number cannot hold exactly). */
  const u64: Type<number | bigint>;
  const f32: Type<number>;
  const f64: Type<number>;
  const string: Type<string>;
  const bytes: Type<Uint8Array>;
  const json: Type<any>;
  function optional<T>(t: Type<T>): Type<T | null>;
  function list<T>(t: Type<T>): Type<T[]>;
  function record<F extends Record<string, Type>>(fields: F): Type<{ [K in keyof F]: ValueOf<F[K]> }>;
  /** The type in Weir's type syntax (`{id: u64, name: string?}`). */
  function text(t: Type): string;
}

/** An operator's declared types: checked at submit, records as rows. */
export interface Types<In = any, Out = any> {
  input?: Type<In>;
  output?: Type<Out>;
}

/** Register a map: `f(value)` is the one output of each record. */
export declare function map<In = any, Out = any>(name: string, f: (value: In) => Out, types?: Types<In, Out>): (value: In) => Out;
/** Register a flat map: `f(value)` returns (or yields) any outputs. */
export declare function flatMap<In = any, Out = any>(name: string, f: (value: In) => Outputs<Out>, types?: Types<In, Out>): (value: In) => Outputs<Out>;
/** Register a filter: keeps the records for which `f(value)` is true. */
export declare function filter<In = any>(name: string, f: (value: In) => boolean, types?: { input?: Type<In> }): (value: In) => boolean;
/** Register a timestamp assigner: `f(value)` is the event time in ms. */
export declare function timestamps<In = any>(name: string, f: (value: In) => number, types?: { input?: Type<In> }): (value: In) => number;
/** Register a stateless operator with set-up. */
export declare function process<C extends new () => ProcessFunction>(name: string, cls: C, types?: Types): C;
/** Register a keyed process function (state and timers). */
export declare function keyedProcess<C extends new () => KeyedProcessFunction>(name: string, cls: C, types?: Types): C;
/** Register a window aggregate. */
export declare function windowAggregate<C extends new () => AggregateFunction>(name: string, cls: C, types?: Types): C;
/** Register a process-window function. */
export declare function windowProcess<C extends new () => ProcessWindowFunction>(name: string, cls: C, types?: Types): C;

/** Write a line to the task's log. */
export declare function log(level: 'debug' | 'info' | 'warn' | 'error', message: string): void;

/** Encode a value in a codec. */
export declare function encode(codec: 'json' | 'msgpack', value: Value): Uint8Array;
/** Decode one value. */
export declare function decode(codec: 'json' | 'msgpack', bytes: Uint8Array): any;

export declare class CodecError extends Error {}
export declare class OperatorError extends Error {}
