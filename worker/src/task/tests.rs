//! A subtask's chain driven directly: what a watermark does to its sinks.

use std::sync::{Arc, Mutex};

use weir_host::{BatchOutput, OperatorError};

use super::*;

/// Event-time timers at `due`: a watermark fires those it passes, one per
/// call (a share), each as a record of its time.
struct Timers {
    due: Vec<i64>,
}

impl StreamOperator for Timers {
    fn process(
        &mut self,
        batch: Vec<Record>,
        _: BatchContext,
    ) -> Result<BatchOutput, OperatorError> {
        Ok(BatchOutput {
            main: batch,
            side: Vec::new(),
        })
    }

    fn on_watermark(&mut self, ctx: BatchContext) -> Result<Output, OperatorError> {
        let wm = ctx.watermark.expect("a watermark");
        let mut out = Output::default();
        if let Some(i) = self.due.iter().position(|&t| t <= wm) {
            let t = self.due.remove(i);
            out.main = Records::List(vec![Record {
                key: None,
                value: t.to_string().into(),
                timestamp: Some(t),
            }]);
        }
        Ok(out)
    }

    fn more_due(&self, watermark: i64) -> bool {
        self.due.iter().any(|&t| t <= watermark)
    }
}

/// A sink that notes what it is asked to do.
struct Noting(Arc<Mutex<Vec<String>>>);

impl Sink for Noting {
    fn write(&mut self, batch: &Records) -> anyhow::Result<()> {
        for r in batch.iter() {
            let value = String::from_utf8_lossy(r.value).into_owned();
            self.0.lock().unwrap().push(format!("write {value}"));
        }
        Ok(())
    }

    fn finish(&mut self) -> anyhow::Result<()> {
        self.0.lock().unwrap().push("finish".into());
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        self.0.lock().unwrap().push("flush".into());
        Ok(())
    }

    fn write_out(&mut self) -> anyhow::Result<()> {
        self.0.lock().unwrap().push("write out".into());
        Ok(())
    }
}

/// A subtask of `timers` chained to a sink, and what the sink was asked.
fn chain(timers: Timers) -> (Subtask, Arc<Mutex<Vec<String>>>, tokio::runtime::Runtime) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let (_, rx) = crate::inbox::channel(4);
    let noted = Arc::new(Mutex::new(Vec::new()));
    let node = |vertex: usize, name: &str, op: NodeOp, main: Vec<Route>| ChainNode {
        vertex,
        name: name.into(),
        op,
        main,
        side: Vec::new(),
        counters: Arc::new(Counters::default()),
        errors: None,
    };
    let subtask = Subtask {
        name: "t[0]".into(),
        head: Head::Input { rx, channels: 1 },
        nodes: vec![
            node(
                0,
                "timers",
                NodeOp::Operator(Box::new(timers)),
                vec![Route::Node(1)],
            ),
            node(
                1,
                "out",
                NodeOp::Sink(Box::new(Noting(noted.clone()))),
                Vec::new(),
            ),
        ],
        outputs: Vec::new(),
        cancel: Arc::new(AtomicBool::new(false)),
        batch_size: 16,
        runtime: runtime.handle().clone(),
        clock: None,
        timing: Timing::new(),
        checkpoints: None,
        pending_commits: Default::default(),
        source_positions: Default::default(),
        ended_input: false,
        final_snapshot: None,
    };
    (subtask, noted, runtime)
}

/// What a watermark fires leaves the sinks at once, each share before the
/// next fires; a watermark that fires nothing leaves the sinks to their
/// interval.
#[test]
fn what_a_watermark_fires_is_written_out_at_once() {
    let (mut task, noted, _runtime) = chain(Timers {
        due: vec![10, 20, 30],
    });
    let take = || std::mem::take(&mut *noted.lock().unwrap());
    task.advance_watermark(5).unwrap();
    assert_eq!(take(), ["flush"], "nothing fired: the interval's flush");
    task.advance_watermark(20).unwrap();
    assert_eq!(
        take(),
        ["write 10", "write out", "write 20", "write out"],
        "each share written out before the next fires, the last before the watermark goes on"
    );
    task.advance_watermark(25).unwrap();
    assert_eq!(take(), ["flush"]);
    task.advance_watermark(40).unwrap();
    assert_eq!(take(), ["write 30", "write out"]);
}
