//! A windowed count per key written as a native Rust operator, for the
//! window benchmarks' baseline: the same records, keys, timestamps and
//! output as the `examples/windowed-counts` component, with its windows in
//! a plain hash map and its timers in an ordered set (no lateness).

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;
use weir_host::{BatchContext, BatchOutput, OperatorError, Output};
use weir_model::graph::{WindowAssigner, WindowSpec};
use weir_model::{JobGraph, Record, Vertex, VertexKind};
use weir_worker::{OperatorFactory, StreamOperator};

/// Creates `count` as a native windowed count.
pub struct NativeWindows;

struct WindowCount {
    size: i64,
    slide: i64,
    /// Per (key, window start): the count.
    counts: HashMap<(Vec<u8>, i64), u64>,
    /// (window end − 1, key, start): when each window fires.
    timers: BTreeSet<(i64, Vec<u8>, i64)>,
}

#[derive(Serialize)]
struct Out<'a> {
    key: &'a str,
    window_start: i64,
    window_end: i64,
    count: u64,
}

fn error(message: String) -> OperatorError {
    OperatorError {
        ident: Default::default(),
        kind: weir_host::ErrorKind::Guest,
        message,
        guest_output: Vec::new(),
    }
}

impl StreamOperator for WindowCount {
    fn process(
        &mut self,
        batch: Vec<Record>,
        ctx: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        for r in batch {
            let t = r.timestamp.ok_or_else(|| error("no timestamp".into()))?;
            let key = r.key.ok_or_else(|| error("no key".into()))?.to_vec();
            let mut start = t - t.rem_euclid(self.slide);
            while start > t - self.size {
                let end = start + self.size;
                if ctx.watermark.is_none_or(|wm| end - 1 > wm) {
                    let n = self.counts.entry((key.clone(), start)).or_insert(0);
                    if *n == 0 {
                        self.timers.insert((end - 1, key.clone(), start));
                    }
                    *n += 1;
                }
                start -= self.slide;
            }
        }
        Ok(BatchOutput::default())
    }

    fn on_watermark(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        let wm = ctx.watermark.unwrap_or(i64::MIN);
        let mut main = Vec::new();
        while let Some((time, _, _)) = self.timers.first() {
            if *time > wm {
                break;
            }
            let (time, key, start) = self.timers.pop_first().expect("checked");
            let count = self.counts.remove(&(key.clone(), start)).unwrap_or(0);
            let key: String = serde_json::from_slice(&key).map_err(|e| error(e.to_string()))?;
            let value = serde_json::to_vec(&Out {
                key: &key,
                window_start: start,
                window_end: start + self.size,
                count,
            })
            .map_err(|e| error(e.to_string()))?;
            main.push(Record {
                key: None,
                value: value.into(),
                timestamp: Some(time),
            });
        }
        Ok(BatchOutput {
            main,
            side: Vec::new(),
        }
        .into())
    }
}

impl OperatorFactory for NativeWindows {
    fn create(
        &self,
        _graph: &JobGraph,
        vertex: &Vertex,
        _subtask: u32,
    ) -> Result<Box<dyn StreamOperator>, OperatorError> {
        let VertexKind::Operator {
            window: Some(WindowSpec { assigner, .. }),
            ..
        } = &vertex.kind
        else {
            return Err(error(format!("`{}` is not a window operator", vertex.name)));
        };
        let (size, slide) = match *assigner {
            WindowAssigner::Tumbling { size_ms } => (size_ms, size_ms),
            WindowAssigner::Sliding { size_ms, slide_ms } => (size_ms, slide_ms),
            WindowAssigner::Session { .. } => {
                return Err(error("sessions are not in this benchmark".into()));
            }
        };
        Ok(Box::new(WindowCount {
            size,
            slide,
            counts: HashMap::new(),
            timers: BTreeSet::new(),
        }))
    }
}
