//! `NamesrvConfig::apply_text` (namesrv.conf and UPDATE_NAMESRV_CONFIG bodies) on arbitrary
//! lossily decoded UTF-8.
//!
//! Checks: nothing panics; a failed apply changes nothing; a config that applies cleanly
//! writes itself out with `to_text`, and applying that text to the defaults gives the same
//! settings back (compared as `to_properties`, so float settings compare by their text).
#![no_main]

use ferromq_namesrv::{NamesrvConfig, RocketMqConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let defaults = NamesrvConfig::default().to_properties();
    let mut config = NamesrvConfig::default();
    let result = config.apply_text(&text);
    let _ = config.black_list();
    let _ = config.idle_timeout();
    if result.is_err() {
        assert_eq!(config.to_properties(), defaults, "a failed apply_text changed the config");
        return;
    }
    let written = config.to_text();
    let mut again = NamesrvConfig::default();
    again.apply_text(&written).unwrap_or_else(|e| panic!("to_text output does not apply: {e}; text {written:?}"));
    assert_eq!(
        again.to_properties(),
        config.to_properties(),
        "to_text -> apply_text changed the config; text {written:?}"
    );
});
