//! An IP address or CIDR block as settings write them (`10.1.2.3`, `10.0.0.0/8`, `::1`,
//! `fe80::/10`): white lists of the name server and the HA port, source addresses of ACL 2.0
//! policies. An IPv4-mapped IPv6 peer (`::ffff:10.1.2.3`, as a dual-stack listener reports it)
//! counts as its IPv4 address.

use std::net::IpAddr;

/// One address or block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpBlock {
    net: IpAddr,
    prefix: u8,
}

/// `ip` with an IPv4-mapped IPv6 address turned into IPv4.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl IpBlock {
    /// Parses one entry; `None` when it is neither an address nor a block.
    pub fn parse(text: &str) -> Option<IpBlock> {
        let t = text.trim();
        let (addr, prefix) = match t.split_once('/') {
            Some((a, p)) => (a, Some(p.parse::<u8>().ok()?)),
            None => (t, None),
        };
        let net: IpAddr = addr.parse().ok()?;
        let max = if net.is_ipv4() { 32 } else { 128 };
        let prefix = prefix.unwrap_or(max);
        (prefix <= max).then_some(IpBlock { net, prefix })
    }

    /// Parses a comma-separated list (blank entries skipped).
    ///
    /// # Errors
    /// The entry that does not parse, naming `key`.
    pub fn parse_list(key: &str, text: &str) -> Result<Vec<IpBlock>, String> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| IpBlock::parse(s).ok_or_else(|| format!("{key}: {s:?} is not an IP address or CIDR block")))
            .collect()
    }

    /// Whether `ip` is inside.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.net, canonical_ip(ip)) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = if self.prefix == 0 { 0 } else { u32::MAX << (32 - u32::from(self.prefix)) };
                u32::from(n) & mask == u32::from(a) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = if self.prefix == 0 { 0 } else { u128::MAX << (128 - u32::from(self.prefix)) };
                u128::from(n) & mask == u128::from(a) & mask
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_and_lists() {
        let list = IpBlock::parse_list("k", "10.0.0.0/8, 192.168.1.7,::1,fe80::/10").expect("valid");
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        let admitted = |s: &str| list.iter().any(|a| a.contains(ip(s)));
        assert!(admitted("10.200.3.4"));
        assert!(admitted("192.168.1.7"));
        assert!(!admitted("192.168.1.8"));
        assert!(admitted("::1"));
        assert!(admitted("fe80::1"));
        assert!(admitted("::ffff:10.0.0.1"));
        assert!(IpBlock::parse_list("k", "10.0.0.0/33").is_err());
        assert!(IpBlock::parse_list("haSlaveWhiteList", "slave-host").expect_err("bad").contains("haSlaveWhiteList"));
        assert!(IpBlock::parse_list("k", " ").expect("empty").is_empty());
        assert!(IpBlock::parse("0.0.0.0/0").expect("all").contains(ip("8.8.8.8")));
    }
}
