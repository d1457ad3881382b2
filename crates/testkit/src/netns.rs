//! A private network for partition tests, out of Linux network namespaces: a hub namespace
//! with a bridge at 10.77.0.1/24, and hosts 10.77.0.11, .12, ... each in its own namespace,
//! joined to the bridge by a veth pair. Servers run in a namespace with `ip netns exec`; a
//! thread of the test joins one with [`Network::enter`] (a socket belongs to the namespace of
//! the thread that creates it, and threads started from that thread stay in it). Nothing is
//! routed out of the hub: the addresses exist only inside these namespaces, so every test gets
//! the same ones. [`Network::cut`] installs blackhole routes, so the two sides lose each
//! other's packets (established connections stall; new ones fail at once) while each still
//! reaches everyone else. Needs root and iproute2's `ip`; dropping the network deletes its
//! namespaces.

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One end of a link: the hub or a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Hub,
    Host(usize),
}

#[derive(Debug)]
pub struct Network {
    hub: String,
    hosts: Vec<String>,
}

/// Runs `ip args..`; panics with its output when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` (iproute2) for a network namespace test: {e}"));
    assert!(
        out.status.success(),
        "`ip {}` failed (network namespace tests need root and iproute2): {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

impl Network {
    /// The hub and `hosts` host namespaces, named after this process so tests can run at once.
    pub fn new(hosts: usize) -> Network {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let prefix = format!("fmq{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut net = Network { hub: format!("{prefix}-hub"), hosts: Vec::new() };
        ip(&["netns", "add", &net.hub]);
        ip(&["-n", &net.hub, "link", "set", "lo", "up"]);
        ip(&["-n", &net.hub, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &net.hub, "addr", "add", &format!("{}/24", Self::ip_of(Node::Hub)), "dev", "br0"]);
        ip(&["-n", &net.hub, "link", "set", "br0", "up"]);
        for i in 0..hosts {
            let name = format!("{prefix}-h{i}");
            ip(&["netns", "add", &name]);
            net.hosts.push(name.clone());
            ip(&["-n", &name, "link", "set", "lo", "up"]);
            let port = format!("v{i}");
            ip(&["-n", &net.hub, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &name]);
            ip(&["-n", &net.hub, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &net.hub, "link", "set", &port, "up"]);
            ip(&["-n", &name, "addr", "add", &format!("{}/24", Self::ip_of(Node::Host(i))), "dev", "eth0"]);
            ip(&["-n", &name, "link", "set", "eth0", "up"]);
        }
        net
    }

    /// The namespace's name, for `ip netns exec`.
    pub fn name(&self, node: Node) -> &str {
        match node {
            Node::Hub => &self.hub,
            Node::Host(i) => &self.hosts[i],
        }
    }

    /// The node's address: 10.77.0.1 for the hub, 10.77.0.(11 + i) for host `i`.
    pub fn ip_of(node: Node) -> String {
        match node {
            Node::Hub => "10.77.0.1".to_owned(),
            Node::Host(i) => format!("10.77.0.{}", 11 + i),
        }
    }

    fn blackhole(&self, verb: &str, a: Node, b: Node) {
        for (from, to) in [(a, b), (b, a)] {
            ip(&["-n", self.name(from), "route", verb, "blackhole", &format!("{}/32", Self::ip_of(to))]);
        }
    }

    /// From now on `a` and `b` lose every packet they send each other.
    pub fn cut(&self, a: Node, b: Node) {
        self.blackhole("add", a, b);
    }

    /// Undoes [`Network::cut`].
    pub fn heal(&self, a: Node, b: Node) {
        self.blackhole("del", a, b);
    }

    /// Moves the calling thread into `node`'s namespace: the sockets it creates from now on,
    /// and the threads it starts, are there.
    pub fn enter(&self, node: Node) {
        enter(self.name(node));
    }
}

/// Moves the calling thread into the network namespace `name` (as `ip netns` names it).
#[allow(unsafe_code)] // setns(2) has no safe wrapper in std
pub fn enter(name: &str) {
    let path = format!("/run/netns/{name}");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    // SAFETY: setns with a valid namespace file descriptor and its own type affects only the
    // calling thread; the descriptor outlives the call.
    let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&file), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns({path}): {}", std::io::Error::last_os_error());
}

impl Drop for Network {
    fn drop(&mut self) {
        for name in self.hosts.iter().chain([&self.hub]) {
            let _ = Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}
