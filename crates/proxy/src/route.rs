//! QueryRoute and QueryAssignment (Java: `RouteActivity`), and the queue a send goes to
//! (Java: `ProducerProcessor`'s queue selectors).

use std::sync::atomic::{AtomicUsize, Ordering};

use ferromq_protocol::body::perm;
use ferromq_protocol::body::{QueueData, TopicRouteData};
use ferromq_protocol::message::java_string_hash;

use crate::brokers::TopicMessageType;
use crate::convert::accepted_types;
use crate::pb::{self, AddressScheme, Permission};
use crate::status::{bad, ProxyResult};

/// Where routes tell clients to connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advertise {
    /// Cluster mode: the addresses the client used, with `port` (None: the client's port).
    RequestEndpoints {
        /// `grpcServerPort`, unless `useEndpointPortFromRequest`.
        port: Option<u16>,
    },
    /// Local mode: each broker's own host, with the gRPC port.
    BrokerHost {
        /// `grpcServerPort`.
        port: u16,
    },
}

/// The endpoints handed out for the broker at `broker_addr`.
pub fn endpoints_for(advertise: &Advertise, request: Option<&pb::Endpoints>, broker_addr: &str) -> pb::Endpoints {
    match advertise {
        Advertise::RequestEndpoints { port } => {
            let mut e = request.cloned().unwrap_or_default();
            if let Some(port) = port {
                for a in &mut e.addresses {
                    a.port = i32::from(*port);
                }
            }
            e
        }
        Advertise::BrokerHost { port } => {
            let host = broker_addr.rsplit_once(':').map_or(broker_addr, |(h, _)| h);
            let scheme = if host.parse::<std::net::Ipv4Addr>().is_ok() {
                AddressScheme::IPv4
            } else if host.trim_matches(['[', ']']).parse::<std::net::Ipv6Addr>().is_ok() {
                AddressScheme::IPv6
            } else {
                AddressScheme::DomainName
            };
            pb::Endpoints {
                scheme: scheme as i32,
                addresses: vec![pb::Address { host: host.trim_matches(['[', ']']).to_owned(), port: i32::from(*port) }],
            }
        }
    }
}

/// The message queues of QueryRoute: for each queue data and each member of its broker set,
/// READ queues, then WRITE, then READ_WRITE ones, numbered from 0 (grpc-proxy.md §6.1). Each
/// names the topic as the request did (`topic`, its namespace included).
pub fn route_queues(
    topic: &pb::Resource,
    route: &TopicRouteData,
    message_type: TopicMessageType,
    advertise: &Advertise,
    request: Option<&pb::Endpoints>,
) -> Vec<pb::MessageQueue> {
    let accept = accepted_types(message_type);
    let mut out = Vec::new();
    for qd in &route.queue_datas {
        // Java stops at a queue data whose broker is missing from the broker datas.
        let Some(bd) = route.broker_datas.iter().find(|b| b.broker_name == qd.broker_name) else { break };
        for (&id, addr) in &bd.broker_addrs {
            let broker = pb::Broker {
                name: bd.broker_name.clone(),
                id: id as i32,
                endpoints: Some(endpoints_for(advertise, request, addr)),
            };
            let mut push = |n: i32, p: Permission, next: &mut i32| {
                for _ in 0..n {
                    out.push(pb::MessageQueue {
                        topic: Some(topic.clone()),
                        id: *next,
                        permission: p as i32,
                        broker: Some(broker.clone()),
                        accept_message_types: accept.clone(),
                    });
                    *next += 1;
                }
            };
            let mut next = 0;
            let (r, w) = (qd.read_queue_nums.max(0), qd.write_queue_nums.max(0));
            match (perm::is_readable(qd.perm), perm::is_writeable(qd.perm)) {
                (true, true) => {
                    let rw = r.min(w);
                    push(r - rw, Permission::Read, &mut next);
                    push(w - rw, Permission::Write, &mut next);
                    push(rw, Permission::ReadWrite, &mut next);
                }
                (false, true) => push(w, Permission::Write, &mut next),
                (true, false) => push(r, Permission::Read, &mut next),
                (false, false) => push(r.max(w).max(1), Permission::None, &mut next),
            }
        }
    }
    out
}

fn queue_permission(p: i32) -> Permission {
    match (perm::is_readable(p), perm::is_writeable(p)) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

/// QueryAssignment's answer: each readable broker group with a master, as one queue of id -1
/// (POP reads the whole broker), or, for a FIFO group, one assignment per read queue.
///
/// # Errors
/// FORBIDDEN "no readable queue".
pub fn assignments(
    topic: &pb::Resource,
    route: &TopicRouteData,
    fifo: bool,
    advertise: &Advertise,
    request: Option<&pb::Endpoints>,
) -> ProxyResult<Vec<pb::Assignment>> {
    let mut out = Vec::new();
    for qd in &route.queue_datas {
        if !perm::is_readable(qd.perm) || qd.read_queue_nums <= 0 {
            continue;
        }
        let Some(bd) = route.broker_datas.iter().find(|b| b.broker_name == qd.broker_name) else { continue };
        let Some(master) = bd.master_addr() else { continue };
        let broker = pb::Broker {
            name: bd.broker_name.clone(),
            id: 0,
            endpoints: Some(endpoints_for(advertise, request, master)),
        };
        let ids: Vec<i32> = if fifo { (0..qd.read_queue_nums).collect() } else { vec![-1] };
        for id in ids {
            out.push(pb::Assignment {
                message_queue: Some(pb::MessageQueue {
                    topic: Some(topic.clone()),
                    id,
                    permission: queue_permission(qd.perm) as i32,
                    broker: Some(broker.clone()),
                    accept_message_types: Vec::new(),
                }),
            });
        }
    }
    if out.is_empty() {
        return Err(bad!(Forbidden, "no readable queue"));
    }
    Ok(out)
}

/// A queue a send may use: broker name, its master's address and the broker's queue id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WritableQueue {
    /// Broker group name.
    pub broker_name: String,
    /// Its master.
    pub addr: String,
    /// The broker's queue id.
    pub queue_id: i32,
}

/// Every writable master queue of the route, sorted by broker name and queue id.
pub fn writable_queues(route: &TopicRouteData) -> Vec<WritableQueue> {
    let mut qds: Vec<&QueueData> = route.queue_datas.iter().filter(|q| perm::is_writeable(q.perm)).collect();
    qds.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    let mut out = Vec::new();
    for qd in qds {
        let Some(addr) =
            route.broker_datas.iter().find(|b| b.broker_name == qd.broker_name).and_then(|b| b.master_addr())
        else {
            continue;
        };
        for queue_id in 0..qd.write_queue_nums.max(0) {
            out.push(WritableQueue { broker_name: qd.broker_name.clone(), addr: addr.to_owned(), queue_id });
        }
    }
    out
}

/// Guava's `Hashing.consistentHash(long, int)`: the bucket in `0..buckets` for `input`, moving
/// as few inputs as possible when `buckets` changes.
pub fn consistent_hash(input: i64, buckets: i32) -> i32 {
    assert!(buckets > 0, "consistent_hash needs at least one bucket");
    let mut state = input as u64;
    let mut candidate: i32 = 0;
    loop {
        state = state.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
        let next_double = f64::from(((state >> 33) as i32).wrapping_add(1)) / f64::from(1u32 << 31);
        let next = (f64::from(candidate + 1) / next_double) as i64;
        if next >= 0 && next < i64::from(buckets) {
            candidate = next as i32;
        } else {
            return candidate;
        }
    }
}

/// Picks the queue for a send: a FIFO message's group always maps to the same queue (while
/// the queue count holds); other messages go round-robin, skipping brokers in `avoid`.
///
/// # Errors
/// FORBIDDEN "no writable queue".
pub fn select_queue<'a>(
    queues: &'a [WritableQueue],
    message_group: Option<&str>,
    round_robin: &AtomicUsize,
    avoid: &[String],
) -> ProxyResult<&'a WritableQueue> {
    if queues.is_empty() {
        return Err(bad!(Forbidden, "no writable queue"));
    }
    if let Some(group) = message_group {
        let i = consistent_hash(i64::from(java_string_hash(group)), queues.len() as i32);
        return Ok(&queues[i as usize]);
    }
    let start = round_robin.fetch_add(1, Ordering::Relaxed);
    let usable =
        (0..queues.len()).map(|k| &queues[(start + k) % queues.len()]).find(|q| !avoid.contains(&q.broker_name));
    Ok(usable.unwrap_or(&queues[start % queues.len()]))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ferromq_protocol::body::BrokerData;

    use super::*;

    fn t() -> pb::Resource {
        pb::Resource { resource_namespace: String::new(), name: "T".into() }
    }

    fn route(perm: i32, r: i32, w: i32) -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![BrokerData::new(
                "C",
                "b1",
                BTreeMap::from([(0, "10.0.0.1:10911".to_owned()), (1, "10.0.0.2:10911".to_owned())]),
            )],
            queue_datas: vec![QueueData {
                broker_name: "b1".into(),
                perm,
                read_queue_nums: r,
                write_queue_nums: w,
                topic_sys_flag: 0,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn queue_order_is_read_write_then_read_write() {
        let adv = Advertise::BrokerHost { port: 8081 };
        let qs = route_queues(&t(), &route(perm::PERM_READ_WRITE, 3, 2), TopicMessageType::Normal, &adv, None);
        // Two members, three queues each: one READ, then two READ_WRITE.
        assert_eq!(qs.len(), 6);
        let perms: Vec<i32> = qs[..3].iter().map(|q| q.permission).collect();
        assert_eq!(perms, vec![Permission::Read as i32, Permission::ReadWrite as i32, Permission::ReadWrite as i32]);
        assert_eq!(qs.iter().map(|q| q.id).collect::<Vec<_>>(), vec![0, 1, 2, 0, 1, 2]);
        let b = qs[0].broker.as_ref().unwrap();
        assert_eq!((b.name.as_str(), b.id), ("b1", 0));
        assert_eq!(b.endpoints.as_ref().unwrap().addresses[0], pb::Address { host: "10.0.0.1".into(), port: 8081 });
        assert_eq!(qs[3].broker.as_ref().unwrap().id, 1);
        assert_eq!(qs[0].accept_message_types, vec![pb::MessageType::Normal as i32]);
        let none = route_queues(&t(), &route(0, 2, 4), TopicMessageType::Fifo, &adv, None);
        assert_eq!(none.len(), 8);
        assert!(none.iter().all(|q| q.permission == Permission::None as i32));
    }

    #[test]
    fn assignments_are_whole_brokers_or_fifo_queues() {
        let adv = Advertise::RequestEndpoints { port: Some(8081) };
        let req = pb::Endpoints {
            scheme: AddressScheme::IPv4 as i32,
            addresses: vec![pb::Address { host: "1.2.3.4".into(), port: 9000 }],
        };
        let a = assignments(&t(), &route(perm::PERM_READ_WRITE, 4, 4), false, &adv, Some(&req)).unwrap();
        assert_eq!(a.len(), 1);
        let mq = a[0].message_queue.as_ref().unwrap();
        assert_eq!(mq.id, -1);
        assert_eq!(mq.broker.as_ref().unwrap().endpoints.as_ref().unwrap().addresses[0].port, 8081);
        let f = assignments(&t(), &route(perm::PERM_READ_WRITE, 4, 4), true, &adv, Some(&req)).unwrap();
        assert_eq!(f.iter().map(|a| a.message_queue.as_ref().unwrap().id).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        assert_eq!(
            assignments(&t(), &route(perm::PERM_WRITE, 4, 4), false, &adv, None).unwrap_err().code,
            pb::Code::Forbidden
        );
    }

    #[test]
    fn consistent_hash_matches_guava() {
        // Every answer is a bucket; one bucket always answers 0.
        for buckets in 1..50 {
            for input in [0i64, 1, 42, -7, i64::MAX] {
                let b = consistent_hash(input, buckets);
                assert!((0..buckets).contains(&b));
            }
        }
        assert_eq!(consistent_hash(0, 1), 0);
        // Monotone: growing the bucket count moves an input only to the new bucket.
        for input in 0..200i64 {
            for n in 1..30 {
                let (a, b) = (consistent_hash(input, n), consistent_hash(input, n + 1));
                assert!(a == b || b == n, "input {input}: {a} -> {b} at {n}");
            }
        }
    }

    #[test]
    fn fifo_groups_stick_to_one_queue() {
        let qs = writable_queues(&route(perm::PERM_READ_WRITE, 4, 4));
        assert_eq!(qs.len(), 4);
        let rr = AtomicUsize::new(0);
        let a = select_queue(&qs, Some("order-1"), &rr, &[]).unwrap().clone();
        for _ in 0..10 {
            assert_eq!(select_queue(&qs, Some("order-1"), &rr, &[]).unwrap(), &a);
        }
        let ids: Vec<i32> = (0..4).map(|_| select_queue(&qs, None, &rr, &[]).unwrap().queue_id).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2, 3]);
        assert_eq!(select_queue(&[], None, &rr, &[]).unwrap_err().code, pb::Code::Forbidden);
    }
}
