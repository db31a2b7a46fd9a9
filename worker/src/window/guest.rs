//! A window function from the job's component: a window aggregate
//! (`accumulate` once per batch, `fire` per batch of firing windows) or a
//! process-window function (its records kept by the host, `fire` with them).

use weir_host::packed;
use weir_host::types::Window;
use weir_host::{BatchContext, BatchOutput, InstanceMetrics, OperatorError, OperatorInstance};
use weir_model::Record;
use weir_window::{Contents, Fired, slot};

use super::{WindowFunction, append_records};

/// A component's window function, in its own operator instance (which keeps
/// no state of its own: the window operator's backend holds the windows).
pub(crate) struct GuestFunction {
    instance: OperatorInstance,
    contents: Contents,
}

impl GuestFunction {
    /// `instance` is a window aggregate (`contents` accumulators) or a
    /// process-window function (records).
    pub(crate) fn new(instance: OperatorInstance, contents: Contents) -> GuestFunction {
        GuestFunction { instance, contents }
    }
}

impl WindowFunction for GuestFunction {
    fn contents(&self) -> Contents {
        self.contents
    }

    fn accumulate(
        &mut self,
        records: Vec<Record>,
        groups: Vec<Vec<Vec<u8>>>,
        additions: &[(u32, u32)],
    ) -> Result<Vec<Vec<u8>>, OperatorError> {
        if self.contents == Contents::Records {
            return Ok(append_records(&records, groups, additions));
        }
        // With accumulators every record is in at most one group, in
        // record order.
        let mut take = vec![false; records.len()];
        let mut targets = Vec::with_capacity(additions.len());
        for &(r, g) in additions {
            take[r as usize] = true;
            targets.push(g);
        }
        // Usually every record (none is late, none between windows).
        let records: Vec<Record> = if take.iter().all(|&t| t) {
            records
        } else {
            records
                .into_iter()
                .zip(take)
                .filter_map(|(r, t)| t.then_some(r))
                .collect()
        };
        let mut group_ends = Vec::with_capacity(groups.len());
        let mut n = 0u32;
        for g in &groups {
            n += g.len() as u32;
            group_ends.push(n);
        }
        let accumulators = packed::pack(groups.iter().flatten());
        let answer = self
            .instance
            .accumulate(records, accumulators, group_ends, targets)?;
        packed::strings(&answer)
            .map(|all| all.into_iter().map(<[u8]>::to_vec).collect())
            .map_err(|e| OperatorError {
                ident: self.instance.ident().clone(),
                kind: weir_host::ErrorKind::Guest,
                message: format!("accumulate: {e}"),
                guest_output: Vec::new(),
            })
    }

    fn fire(&mut self, fired: Vec<Fired>, ctx: BatchContext) -> Result<BatchOutput, OperatorError> {
        let mut windows = Vec::with_capacity(fired.len());
        let mut strings: Vec<Vec<u8>> = Vec::new();
        let mut ends = Vec::with_capacity(fired.len());
        for f in fired {
            match self.contents {
                Contents::Accumulator => strings.extend(f.contents),
                Contents::Records => {
                    for c in &f.contents {
                        let records = slot::records(c).ok_or_else(|| OperatorError {
                            ident: self.instance.ident().clone(),
                            kind: weir_host::ErrorKind::Host,
                            message: "a window's stored records are corrupt".into(),
                            guest_output: Vec::new(),
                        })?;
                        strings.extend(records.into_iter().map(<[u8]>::to_vec));
                    }
                }
            }
            ends.push(strings.len() as u32);
            windows.push(Window {
                key: f.key,
                start: f.start,
                end: f.end,
            });
        }
        let contents = packed::pack(&strings);
        self.instance.fire_windows(windows, contents, ends, ctx)
    }

    fn metrics(&self) -> InstanceMetrics {
        let m = self.instance.metrics();
        InstanceMetrics {
            state: Default::default(),
            ..m
        }
    }
}
