//! `NamesrvConfig::apply_text` (namesrv.conf and UPDATE_NAMESRV_CONFIG bodies) on arbitrary
//! lossily decoded UTF-8.
//!
//! Checks: nothing panics; a config that applies cleanly writes itself out with `to_text`, and
//! applying that text to the defaults gives the same config back.
#![no_main]

use ferromq_namesrv::NamesrvConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut config = NamesrvConfig::default();
    let result = config.apply_text(&text);
    let _ = config.black_list();
    let _ = config.idle_timeout();
    if result.is_err() {
        return;
    }
    let written = config.to_text();
    let mut again = NamesrvConfig::default();
    again
        .apply_text(&written)
        .unwrap_or_else(|e| panic!("to_text output does not apply: {e}; text {written:?}"));
    assert_eq!(again, config, "to_text -> apply_text changed the config; text {written:?}");
});
