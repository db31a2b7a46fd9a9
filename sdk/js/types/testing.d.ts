// Types of `weir/testing`.
import { OperatorError, TimeDomainName, Value, WindowSpec } from './index.js';

export { OperatorError };

export interface WindowOptions {
  allowedLatenessMs?: number;
  processingTime?: boolean;
}
export declare function tumbling(sizeMs: number, options?: WindowOptions): WindowSpec;
export declare function sliding(sizeMs: number, slideMs: number, options?: WindowOptions): WindowSpec;
export declare function session(gapMs: number, options?: WindowOptions): WindowSpec;

export interface HarnessOptions {
  params?: Record<string, string | number>;
  window?: WindowSpec | null;
  msgpack?: boolean;
  /** An operator that declares types reads and writes rows, as beside operators of its types. */
  rows?: boolean;
}

/** Runs one registered operator with in-memory state, timers and windows. */
export declare class Harness {
  constructor(operator: string | Function, options?: HarnessOptions);
  watermark: number | null;
  processingTime: number;
  readonly lastTimestamps: (number | null)[];
  readonly timers: [TimeDomainName, number][];
  process(value: Value, options?: { key?: Value; timestamp?: number | null }): any[];
  sideOutput(name: string): any[];
  advanceWatermark(watermark: number): any[];
  advanceProcessingTime(time: number): any[];
}
