//! A bundle archive from an upload: unpacking never panics and never
//! returns more than its limit.
#![no_main]

use libfuzzer_sys::fuzz_target;

const LIMIT: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    if let Ok(files) = weir_model::bundle::unpack(data, LIMIT) {
        let components: usize = files.components.iter().map(|(_, c)| c.len()).sum();
        assert!((files.manifest.len() + components) as u64 <= LIMIT);
    }
});
