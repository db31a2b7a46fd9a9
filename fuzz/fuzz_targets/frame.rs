//! A data frame from another worker: decoding never panics, and what
//! decodes encodes back to a frame that decodes the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use weir_model::frame::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = decode(bytes::Bytes::copy_from_slice(data)) {
        let again = decode(encode(&frame)).expect("an encoded frame decodes");
        assert_eq!(again, frame);
    }
});
