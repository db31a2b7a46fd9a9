//! The word count's operators written in native Rust, for the benchmark's
//! "native operators in the same runtime" variant: the same records, the
//! same JSON codec and the same in-memory state backend as the Wasm
//! operators see.

use serde::Serialize;
use weir_host::{BatchContext, BatchOutput, MemoryStateBackend, OperatorError, StateBackend};
use weir_model::{JobGraph, Record, RecordBuffer, Vertex, VertexKind};
use weir_state::{StateKey, StateKind, StateOp};
use weir_worker::{OperatorFactory, StreamOperator};

/// Creates `split-words` and `count` as native operators.
pub struct NativeWordCount;

struct Split;

struct Count {
    backend: MemoryStateBackend,
    state: u32,
}

#[derive(Serialize)]
struct WordCount {
    word: String,
    count: u64,
}

fn codec_error(e: serde_json::Error) -> OperatorError {
    OperatorError {
        ident: Default::default(),
        kind: weir_host::ErrorKind::Guest,
        message: e.to_string(),
        guest_output: Vec::new(),
    }
}

impl StreamOperator for Split {
    fn process(
        &mut self,
        batch: Vec<Record>,
        _: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        let mut main = RecordBuffer::with_capacity(batch.len() * 10, batch.len() * 100);
        for r in batch {
            let line: String = serde_json::from_slice(&r.value).map_err(codec_error)?;
            for w in line
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
            {
                let mut result = Ok(());
                main.push(None, r.timestamp, |v| {
                    result = serde_json::to_writer(v, &w.to_lowercase());
                });
                result.map_err(codec_error)?;
            }
        }
        Ok(BatchOutput {
            main: main.finish(),
            side: Vec::new(),
        })
    }
}

impl StreamOperator for Count {
    fn process(
        &mut self,
        batch: Vec<Record>,
        _: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        let mut main = RecordBuffer::with_capacity(batch.len(), batch.len() * 32);
        for r in batch {
            let key = r.key.expect("keyed input").to_vec();
            let previous = self.backend.get_value(self.state, &key).expect("in memory");
            let count = match previous {
                Some(v) => serde_json::from_slice::<u64>(&v).map_err(codec_error)?,
                None => 0,
            } + 1;
            let word: String = serde_json::from_slice(&r.value).map_err(codec_error)?;
            self.backend
                .apply(StateOp::PutValue {
                    target: StateKey {
                        state: self.state,
                        key,
                    },
                    value: serde_json::to_vec(&count).map_err(codec_error)?,
                })
                .expect("in memory");
            let mut result = Ok(());
            main.push(None, r.timestamp, |v| {
                result = serde_json::to_writer(v, &WordCount { word, count });
            });
            result.map_err(codec_error)?;
        }
        Ok(BatchOutput {
            main: main.finish(),
            side: Vec::new(),
        })
    }
}

impl OperatorFactory for NativeWordCount {
    fn create(
        &self,
        _graph: &JobGraph,
        vertex: &Vertex,
        _subtask: u32,
    ) -> Result<Box<dyn StreamOperator>, OperatorError> {
        let VertexKind::Operator { function, .. } = &vertex.kind else {
            unreachable!("operator vertices only")
        };
        Ok(match function.as_str() {
            "split-words" => Box::new(Split),
            "count" => {
                let mut backend = MemoryStateBackend::new();
                let state = backend
                    .register("count", StateKind::Value)
                    .expect("fresh backend");
                Box::new(Count { backend, state })
            }
            other => unreachable!("the word count has no operator {other}"),
        })
    }
}
