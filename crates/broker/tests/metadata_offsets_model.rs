//! Property test: random commits, removals, clones, periodic persists and restarts keep the
//! consumer offset table equal to a plain `BTreeMap` model, in memory and on disk.

use std::collections::BTreeMap;

use proptest::prelude::*;

use ferromq_broker::metadata::ConsumerOffsetManager;

type Model = BTreeMap<String, BTreeMap<i32, i64>>;

const TOPICS: [&str; 3] = ["A", "B", "%RETRY%g1"];
const GROUPS: [&str; 3] = ["g1", "g2", "g12"];

#[derive(Debug, Clone)]
enum Op {
    Commit {
        topic: usize,
        group: usize,
        queue_id: i32,
        offset: i64,
    },
    RemoveGroup(usize),
    RemoveTopic(usize),
    Clone {
        src: usize,
        dest: usize,
        topic: usize,
    },
    /// The periodic task: writes only if something changed.
    PersistIfDirty,
    /// A restart without a final persist: what was not written is lost.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..TOPICS.len(), 0..GROUPS.len(), 0..4i32, any::<i64>())
            .prop_map(|(topic, group, queue_id, offset)| Op::Commit { topic, group, queue_id, offset }),
        1 => (0..GROUPS.len()).prop_map(Op::RemoveGroup),
        1 => (0..TOPICS.len()).prop_map(Op::RemoveTopic),
        1 => (0..GROUPS.len(), 0..GROUPS.len(), 0..TOPICS.len())
            .prop_map(|(src, dest, topic)| Op::Clone { src, dest, topic }),
        2 => Just(Op::PersistIfDirty),
        1 => Just(Op::Restart),
    ]
}

fn key(topic: usize, group: usize) -> String {
    format!("{}@{}", TOPICS[topic], GROUPS[group])
}

fn apply(model: &mut Model, op: &Op) {
    match *op {
        Op::Commit { topic, group, queue_id, offset } => {
            model.entry(key(topic, group)).or_default().insert(queue_id, offset);
        }
        Op::RemoveGroup(group) => model.retain(|k, _| !k.ends_with(&format!("@{}", GROUPS[group]))),
        Op::RemoveTopic(topic) => model.retain(|k, _| !k.starts_with(&format!("{}@", TOPICS[topic]))),
        Op::Clone { src, dest, topic } => {
            if let Some(offsets) = model.get(&key(topic, src)).cloned() {
                model.insert(key(topic, dest), offsets);
            }
        }
        Op::PersistIfDirty | Op::Restart => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn offsets_match_model_across_persists_and_restarts(ops in prop::collection::vec(op(), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config").join("consumerOffset.json");
        let mut offsets = ConsumerOffsetManager::load(&path).unwrap();
        let mut live = Model::new();
        let mut durable = Model::new();
        for op in &ops {
            match op {
                Op::Commit { topic, group, queue_id, offset } => {
                    offsets.commit_offset("127.0.0.1:9", GROUPS[*group], TOPICS[*topic], *queue_id, *offset);
                }
                Op::RemoveGroup(group) => {
                    offsets.remove_offset(GROUPS[*group]);
                }
                Op::RemoveTopic(topic) => {
                    offsets.remove_topic(TOPICS[*topic]);
                }
                Op::Clone { src, dest, topic } => offsets.clone_offset(GROUPS[*src], GROUPS[*dest], TOPICS[*topic]),
                Op::PersistIfDirty => {
                    offsets.persist_if_dirty().unwrap();
                    durable = live.clone();
                }
                Op::Restart => {
                    offsets = ConsumerOffsetManager::load(&path).unwrap();
                    live = durable.clone();
                }
            }
            apply(&mut live, op);
            prop_assert_eq!(&offsets.snapshot().offset_table, &live, "after {:?}", op);
        }
        offsets.persist_if_dirty().unwrap();
        let reloaded = ConsumerOffsetManager::load(&path).unwrap();
        prop_assert_eq!(reloaded.snapshot().offset_table, live);
        for (k, queues) in &reloaded.snapshot().offset_table {
            let (topic, group) = k.split_once('@').unwrap();
            for (queue_id, offset) in queues {
                prop_assert_eq!(reloaded.query_offset(group, topic, *queue_id), Some(*offset));
            }
        }
    }
}
