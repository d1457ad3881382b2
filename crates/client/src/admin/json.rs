//! JSON helpers re-exported for admin tools that print machine-readable output, so they need
//! no JSON crate of their own.

pub use serde_json::{from_str, json, to_string_pretty, Map, Value};
