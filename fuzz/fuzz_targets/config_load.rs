//! Any bytes as a config file through the real loader (layering, parsing, validation):
//! it must answer with a plan or with errors, never panic, and never give an empty error.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let file = std::env::temp_dir().join(format!("ho-fuzz-{}.toml", std::process::id()));
    std::fs::write(&file, data).expect("temp dir writable");
    if let Err(e) = ho_config::load_plan(&[&file]) {
        assert!(!e.to_string().trim().is_empty(), "an empty error");
    }
});
