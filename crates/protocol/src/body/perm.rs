//! Topic and broker permission bits (`perm` in TopicConfig and QueueData).
//! Java: `org.apache.rocketmq.common.constant.PermName`.
//!
//! Only the bit layout and its readings; enforcing permissions is the broker's job.

/// Priority bit (value 8). Not a valid topic permission on its own.
pub const PERM_PRIORITY: i32 = 1 << 3;
/// Consumers may read (value 4).
pub const PERM_READ: i32 = 1 << 2;
/// Producers may write (value 2).
pub const PERM_WRITE: i32 = 1 << 1;
/// Inherited from the default topic when auto-created (value 1).
pub const PERM_INHERIT: i32 = 1;
/// Read and write (6), the default of a new topic.
pub const PERM_READ_WRITE: i32 = PERM_READ | PERM_WRITE;
/// Bit index of [`PERM_READ`], as a group's forbidden bits on a topic count it.
pub const INDEX_PERM_READ: u32 = 2;
/// Bit index of [`PERM_WRITE`].
pub const INDEX_PERM_WRITE: u32 = 1;

/// True if the read bit is set.
pub fn is_readable(perm: i32) -> bool {
    perm & PERM_READ == PERM_READ
}

/// True if the write bit is set.
pub fn is_writeable(perm: i32) -> bool {
    perm & PERM_WRITE == PERM_WRITE
}

/// True if the inherit bit is set.
pub fn is_inherited(perm: i32) -> bool {
    perm & PERM_INHERIT == PERM_INHERIT
}

/// True if the priority bit is set.
pub fn is_priority(perm: i32) -> bool {
    perm & PERM_PRIORITY == PERM_PRIORITY
}

/// True if readable or writeable.
pub fn is_accessible(perm: i32) -> bool {
    is_readable(perm) || is_writeable(perm)
}

/// True for a permission value a topic may carry: 0..=7 (the priority bit excluded).
pub fn is_valid(perm: i32) -> bool {
    (0..PERM_PRIORITY).contains(&perm)
}

/// Three letters `R`, `W`, `X` (inherit), `-` where the bit is clear: 6 -> `"RW-"`.
/// Java: `PermName#perm2String`.
pub fn perm_to_string(perm: i32) -> String {
    let mut text = String::with_capacity(3);
    text.push(if is_readable(perm) { 'R' } else { '-' });
    text.push(if is_writeable(perm) { 'W' } else { '-' });
    text.push(if is_inherited(perm) { 'X' } else { '-' });
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perm_strings_match_java() {
        assert_eq!(perm_to_string(PERM_READ_WRITE), "RW-");
        assert_eq!(perm_to_string(PERM_READ), "R--");
        assert_eq!(perm_to_string(PERM_WRITE | PERM_INHERIT), "-WX");
        assert_eq!(perm_to_string(0), "---");
        assert_eq!(perm_to_string(PERM_PRIORITY), "---");
    }

    #[test]
    fn bit_readings() {
        assert!(is_readable(6) && is_writeable(6) && !is_inherited(6));
        assert!(!is_accessible(PERM_INHERIT));
        assert!(is_priority(PERM_PRIORITY | PERM_READ));
        assert!(is_valid(7) && !is_valid(8) && !is_valid(-1));
    }
}
