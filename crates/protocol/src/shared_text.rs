//! Values kept as ranges of one text buffer (`ExtFields`, `MessageProperties`): building or
//! decoding a map of them allocates the buffer, not a string per value. A replaced or removed
//! value leaves dead bytes behind; the buffer is rewritten once they are most of it.

/// Rewrites `text` without dead bytes, moving each entry's `(start, end)` range, once the
/// `garbage` bytes are over 1 KiB and the larger part of it (a value set over and over must not
/// grow the buffer without bound).
pub(crate) fn compact_if_wasteful<K>(text: &mut String, garbage: &mut usize, entries: &mut [(K, u32, u32)]) {
    if *garbage <= 1024 || *garbage <= text.len() / 2 {
        return;
    }
    let mut kept = String::with_capacity(text.len() - *garbage);
    for (_, start, end) in entries {
        let from = kept.len() as u32;
        kept.push_str(&text[*start as usize..*end as usize]);
        (*start, *end) = (from, kept.len() as u32);
    }
    *text = kept;
    *garbage = 0;
}
