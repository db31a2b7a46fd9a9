//! The Kafka-protocol broker the tests start ([`weir_tests::kafka`]).

#[allow(unused_imports)]
pub use weir_tests::kafka::*;
