//! # Weir's windows
//!
//! The semantics of Flink's window operator — assigners (tumbling, sliding
//! with any ratio of size and slide, session), event and processing time,
//! allowed lateness and the late side output, firing at `end - 1` — with no
//! opinion on where state lives or what a window computes. The worker runs
//! it on its state backend and timers, with a window function in the
//! runtime or in a component; the SDK's test harness runs it in memory.
//!
//! Records are kept in *slots*: a tumbling window, a session, and for
//! sliding windows whose function has an accumulator, a *pane* of
//! `gcd(size, slide)`: each record is added to one pane, and a window
//! merges its panes' accumulators when it fires, instead of adding every
//! record to each of its `size / slide` windows. A key's slots are one
//! stored value ([`slot::encode`]); a timer at each window's end, and at the
//! end of its allowed lateness, fires it and cleans it up.

mod engine;
mod memory;
pub mod slot;
mod spec;

pub use engine::{Assigned, Fired, Store};
pub use memory::MemoryStore;
pub use slot::Slot;
pub use spec::{Assigner, Contents, Spec, SpecError, Time};

#[cfg(test)]
mod tests;
