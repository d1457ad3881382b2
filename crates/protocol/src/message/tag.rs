//! Java `String.hashCode` and the consume-queue tags code derived from it.

/// Java's `String.hashCode`: `h = 31 * h + unit` over the UTF-16 code units, wrapping at 32 bits.
///
/// Characters outside the Basic Multilingual Plane count as two code units (a surrogate pair),
/// exactly as in Java, so tag codes written by Java brokers match ours.
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The consume-queue tags code of a message: the hash of its TAGS property widened to `i64`, or
/// 0 when there is no tag or it is empty.
///
/// MULTI_TAG topics hash the whole TAGS string the same way. (Messages in the schedule topic
/// store a delivery time instead; that is the store's business, not this function's.)
/// Java: `MessageExtBrokerInner#tagsString2tagsCode`.
pub fn tags_code(tags: Option<&str>) -> i64 {
    match tags {
        Some(tags) if !tags.is_empty() => i64::from(java_string_hash(tags)),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_like_java() {
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("\u{1F600}"), 1_772_899);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn tags_code_is_sign_extended_and_zero_without_tag() {
        assert_eq!(tags_code(Some("polygenelubricants")), -2_147_483_648);
        assert_eq!(tags_code(Some("")), 0);
        assert_eq!(tags_code(None), 0);
    }
}
