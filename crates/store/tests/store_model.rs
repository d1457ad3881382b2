//! Model-based test: random sequences of puts, clean restarts, unclean restarts and cut tails
//! against a plain list of what was acknowledged; after every step each queue reads back
//! exactly the model's messages, in order, with consecutive queue offsets.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use ferromq_protocol::message::StoredMessage;
use ferromq_store::{FlushDiskType, GetMessageStatus, MessageStore, PutMessageStatus, StoreConfig};
use proptest::prelude::*;

fn host() -> SocketAddr {
    "127.0.0.1:10911".parse().unwrap()
}

fn config(root: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 2048,
        mapped_file_size_consume_queue: 20 * 8,
        flush_disk_type: FlushDiskType::AsyncFlush,
        max_hash_slot_num: 16,
        max_index_num: 16,
        ..StoreConfig::with_root(root)
    }
}

#[derive(Debug, Clone)]
enum Op {
    Put {
        queue: i32,
        len: usize,
    },
    Restart,
    UncleanRestart,
    /// Cut this many bytes off the end of the CommitLog data, then restart uncleanly.
    CutTail(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i32..3, 1usize..400).prop_map(|(queue, len)| Op::Put { queue, len }),
        1 => Just(Op::Restart),
        1 => Just(Op::UncleanRestart),
        1 => (1usize..300).prop_map(Op::CutTail),
    ]
}

/// One acknowledged message: its body and where its record ends in the CommitLog.
#[derive(Debug, Clone)]
struct Acked {
    body: Vec<u8>,
    end: i64,
}

fn read_queue(store: &MessageStore, queue: i32) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut offset = store.min_offset_in_queue("M", queue);
    loop {
        let r = store.get_message("M", queue, offset, 32, 1 << 20, None);
        if r.status != GetMessageStatus::Found {
            return out;
        }
        for (m, q) in r.messages.iter().zip(&r.queue_offsets) {
            out.push((*q, StoredMessage::decode(m).unwrap().0.body.to_vec()));
        }
        offset = r.next_begin_offset;
    }
}

fn run(ops: Vec<Op>) -> Result<(), TestCaseError> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut model: BTreeMap<i32, Vec<Acked>> = BTreeMap::new();
    let mut store = Some(MessageStore::open(config(dir.path()), host()).unwrap());
    let mut counter = 0u32;
    for op in ops {
        match op {
            Op::Put { queue, len } => {
                counter += 1;
                let body: Vec<u8> = format!("{counter}:")
                    .bytes()
                    .chain(std::iter::repeat_n(b'a' + (counter % 26) as u8, len))
                    .collect();
                let msg = StoredMessage {
                    topic: "M".into(),
                    queue_id: queue,
                    body: Bytes::from(body.clone()),
                    born_host: host(),
                    store_host: host(),
                    ..StoredMessage::default()
                };
                let r = rt.block_on(store.as_ref().unwrap().put_message(msg));
                prop_assert_eq!(r.status, PutMessageStatus::PutOk);
                let a = r.append.unwrap();
                model.entry(queue).or_default().push(Acked { body, end: a.wrote_offset + a.wrote_bytes as i64 });
            }
            Op::Restart => {
                store.take().unwrap().shutdown();
                store = Some(MessageStore::open(config(dir.path()), host()).unwrap());
            }
            Op::UncleanRestart => {
                store.take().unwrap().shutdown();
                std::fs::write(dir.path().join("abort"), b"1").unwrap();
                store = Some(MessageStore::open(config(dir.path()), host()).unwrap());
            }
            Op::CutTail(n) => {
                let s = store.take().unwrap();
                let end = s.max_phy_offset();
                s.shutdown();
                drop(s);
                let cut = (end - n as i64).max(end - end % 2048);
                let path = dir.path().join("commitlog").join(format!("{:020}", end - end % 2048));
                if end % 2048 != 0 && path.exists() {
                    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                    f.set_len((cut % 2048) as u64).unwrap();
                }
                for acked in model.values_mut() {
                    acked.retain(|a| a.end <= cut || end % 2048 == 0);
                }
                std::fs::write(dir.path().join("abort"), b"1").unwrap();
                store = Some(MessageStore::open(config(dir.path()), host()).unwrap());
            }
        }
        let s = store.as_ref().unwrap();
        prop_assert!(s.wait_dispatched(Duration::from_secs(10)));
        for queue in 0..3 {
            let got = read_queue(s, queue);
            let want: Vec<Vec<u8>> =
                model.get(&queue).map(|v| v.iter().map(|a| a.body.clone()).collect()).unwrap_or_default();
            let bodies: Vec<Vec<u8>> = got.iter().map(|(_, b)| b.clone()).collect();
            prop_assert_eq!(&bodies, &want, "queue {}", queue);
            for (i, (q, _)) in got.iter().enumerate() {
                prop_assert_eq!(*q, i as i64, "queue offsets are consecutive from 0");
            }
            prop_assert_eq!(s.max_offset_in_queue("M", queue), want.len() as i64);
        }
    }
    store.take().unwrap().shutdown();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn store_matches_model_through_puts_restarts_and_cut_tails(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops)?;
    }
}
