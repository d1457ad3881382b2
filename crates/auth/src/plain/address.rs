//! White-list address patterns of ACL 1.0 (Java: `RemoteAddressStrategyFactory`): a blank
//! pattern matches nothing; `*`, `*.*.*.*` and `*:*:*:*:*:*:*:*` match everything;
//! `192.168.1.{1,2,3}` a set in the last place; `1.1.1.1,2.2.2.2` a list; segments with `*` or
//! `a-b` ranges (`192.168.*.*`, `10.10.1-100.*`, the IPv6 forms with `:`); else one address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::AclError;

/// One compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressPattern {
    /// Blank: matches no address.
    Nothing,
    /// `*`: matches every address.
    Everything,
    /// Any of these addresses.
    Addresses(Vec<IpAddr>),
    /// Segment by segment: four for IPv4, eight for IPv6.
    Segments {
        /// Whether the segments are IPv6's.
        v6: bool,
        /// Inclusive bounds per segment.
        ranges: Vec<(u16, u16)>,
    },
}

fn invalid(pattern: &str, reason: &'static str) -> AclError {
    AclError::AddressPattern { pattern: pattern.to_owned(), reason }
}

impl AddressPattern {
    /// Compiles `pattern`.
    ///
    /// # Errors
    /// [`AclError::AddressPattern`] naming the pattern and the rule it breaks.
    pub fn parse(pattern: &str) -> Result<Self, AclError> {
        let p = pattern.trim();
        if p.is_empty() {
            return Ok(AddressPattern::Nothing);
        }
        if matches!(p, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(AddressPattern::Everything);
        }
        if let Some(open) = p.find('{') {
            let prefix = &p[..open];
            let inner = p[open + 1..]
                .strip_suffix('}')
                .ok_or_else(|| invalid(pattern, "a '{' set must end the pattern with '}'"))?;
            if !(prefix.ends_with('.') || prefix.ends_with(':')) {
                return Err(invalid(pattern, "a '{' set must follow a '.' or ':'"));
            }
            let addrs = inner
                .split(',')
                .map(|item| {
                    literal(&format!("{prefix}{}", item.trim()))
                        .ok_or_else(|| invalid(pattern, "a member of the '{' set is not an address"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(AddressPattern::Addresses(addrs));
        }
        if p.contains(',') {
            let addrs = p
                .split(',')
                .map(|item| {
                    literal(item.trim()).ok_or_else(|| invalid(pattern, "a member of the list is not an address"))
                })
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(AddressPattern::Addresses(addrs));
        }
        if p.contains('*') || p.contains('-') {
            return segments(p).ok_or_else(|| invalid(pattern, "segments must be numbers, '*' or 'a-b' ranges"));
        }
        literal(p)
            .map(|a| AddressPattern::Addresses(vec![a]))
            .ok_or_else(|| invalid(pattern, "not an IPv4 or IPv6 address"))
    }

    /// Whether `ip` matches. IPv4-mapped IPv6 addresses count as their IPv4 address.
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match self {
            AddressPattern::Nothing => false,
            AddressPattern::Everything => true,
            AddressPattern::Addresses(list) => list.contains(&ip),
            AddressPattern::Segments { v6, ranges } => {
                let parts: Vec<u16> = match (ip, v6) {
                    (IpAddr::V4(a), false) => a.octets().iter().map(|&o| u16::from(o)).collect(),
                    (IpAddr::V6(a), true) => a.segments().to_vec(),
                    _ => return false,
                };
                parts.iter().zip(ranges).all(|(part, (lo, hi))| (lo..=hi).contains(&part))
            }
        }
    }
}

/// `ip` with an IPv4-mapped IPv6 address turned into IPv4 (a dual-stack listener reports
/// IPv4 peers that way).
pub use ferromq_config::canonical_ip as canonical;

fn literal(text: &str) -> Option<IpAddr> {
    if let Ok(v4) = text.parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(v4));
    }
    text.parse::<Ipv6Addr>().ok().map(|v6| canonical(IpAddr::V6(v6)))
}

fn segments(p: &str) -> Option<AddressPattern> {
    if !p.contains(':') {
        let parts: Vec<&str> = p.split('.').collect();
        if parts.len() != 4 {
            return None;
        }
        let ranges = parts.iter().map(|s| segment(s, 10, 255)).collect::<Option<Vec<_>>>()?;
        return Some(AddressPattern::Segments { v6: false, ranges });
    }
    // IPv6: expand "::" to zero segments, and a trailing "*" to cover whatever remains.
    let (left, right) = match p.split_once("::") {
        Some((l, r)) => (l, Some(r)),
        None => (p, None),
    };
    let split = |s: &str| -> Vec<String> {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split(':').map(str::to_owned).collect()
        }
    };
    let mut parts = split(left);
    match right {
        Some(r) => {
            let tail = split(r);
            if parts.len() + tail.len() > 7 {
                return None;
            }
            parts.resize(8 - tail.len(), "0".to_owned());
            parts.extend(tail);
        }
        None => {
            if parts.len() < 8 && parts.last().is_some_and(|s| s == "*") {
                parts.resize(8, "*".to_owned());
            }
        }
    }
    if parts.len() != 8 {
        return None;
    }
    let ranges = parts.iter().map(|s| segment(s, 16, 0xffff)).collect::<Option<Vec<_>>>()?;
    Some(AddressPattern::Segments { v6: true, ranges })
}

fn segment(s: &str, radix: u32, max: u16) -> Option<(u16, u16)> {
    let num = |t: &str| u16::from_str_radix(t.trim(), radix).ok().filter(|n| *n <= max);
    if s.trim() == "*" {
        return Some((0, max));
    }
    if let Some((lo, hi)) = s.split_once('-') {
        let (lo, hi) = (num(lo)?, num(hi)?);
        return (lo <= hi).then_some((lo, hi));
    }
    num(s).map(|n| (n, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("test address")
    }

    fn matches(pattern: &str, addr: &str) -> bool {
        AddressPattern::parse(pattern).expect("valid pattern").matches(ip(addr))
    }

    #[test]
    fn blank_matches_nothing_and_stars_everything() {
        assert!(!matches("", "127.0.0.1"));
        assert!(!matches("  ", "127.0.0.1"));
        for p in ["*", "*.*.*.*", "*:*:*:*:*:*:*:*"] {
            assert!(matches(p, "10.1.2.3"), "{p}");
            assert!(matches(p, "::1"), "{p}");
        }
    }

    #[test]
    fn sets_lists_and_literals() {
        assert!(matches("192.168.1.{1,2,3}", "192.168.1.2"));
        assert!(!matches("192.168.1.{1,2,3}", "192.168.1.4"));
        assert!(matches("1.1.1.1,2.2.2.2", "2.2.2.2"));
        assert!(!matches("1.1.1.1,2.2.2.2", "3.3.3.3"));
        assert!(matches("127.0.0.1", "127.0.0.1"));
        assert!(matches("127.0.0.1", "::ffff:127.0.0.1"));
        assert!(matches("::1", "::1"));
    }

    #[test]
    fn segment_ranges() {
        assert!(matches("192.168.*.*", "192.168.200.7"));
        assert!(!matches("192.168.*.*", "192.169.0.1"));
        assert!(matches("10.10.1-100.*", "10.10.100.9"));
        assert!(!matches("10.10.1-100.*", "10.10.101.9"));
        assert!(matches("2::ac5:78:1-200:*", "2::ac5:78:150:1"));
        assert!(!matches("2::ac5:78:1-200:*", "2::ac5:78:201:1"));
        assert!(matches("fe80:*", "fe80::1"));
        assert!(!matches("192.168.*.*", "fe80::1"));
    }

    #[test]
    fn bad_patterns_are_refused_with_the_pattern_named() {
        for p in ["192.168.1.{1,2", "1.1.1.1,nope", "192.168.*", "10.10.100-1.*", "300.1.1.1", "host.example"] {
            let e = AddressPattern::parse(p).expect_err(p);
            assert!(e.to_string().contains(p), "{e}");
        }
    }
}
