//! Weir's benchmarks: the `weir-bench` binary (`src/main.rs`) and its modules.
