//! What the registration loop owes the name servers: a full registration (the whole topic
//! table) or the topics changed since the last round, coalesced. Topics created one by one are
//! registered one by one (REGISTER_TOPIC_IN_NAMESRV, Java's `registerSingleTopicAll`), which
//! costs the same whatever the table's size, instead of re-sending the whole table each time;
//! many changes waiting at once are cheaper as one full registration.

use std::collections::BTreeSet;

/// Changed topics above which one full registration replaces the single-topic ones.
pub(crate) const SINGLE_TOPIC_BATCH_MAX: usize = 64;

/// One round of registration work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RegistrationWork {
    /// REGISTER_BROKER with the whole table.
    Full,
    /// These topics only.
    Topics(Vec<String>),
}

/// Pending registration work, filled by topic changes and emptied by the loop.
#[derive(Debug, Default)]
pub(crate) struct RegistrationQueue {
    full: bool,
    topics: BTreeSet<String>,
}

impl RegistrationQueue {
    /// `topic` was created or changed.
    pub(crate) fn topic_changed(&mut self, topic: &str) {
        if !self.full {
            self.topics.insert(topic.to_owned());
        }
    }

    /// The next round must send the whole table (start, role or permission change, a name
    /// server that missed a registration).
    pub(crate) fn request_full(&mut self) {
        self.full = true;
        self.topics.clear();
    }

    /// Takes what is pending, if anything.
    pub(crate) fn take(&mut self) -> Option<RegistrationWork> {
        if std::mem::take(&mut self.full) || self.topics.len() > SINGLE_TOPIC_BATCH_MAX {
            self.topics.clear();
            return Some(RegistrationWork::Full);
        }
        if self.topics.is_empty() {
            return None;
        }
        Some(RegistrationWork::Topics(std::mem::take(&mut self.topics).into_iter().collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_topics_are_coalesced_and_deduplicated() {
        let mut q = RegistrationQueue::default();
        assert_eq!(q.take(), None);
        q.topic_changed("B");
        q.topic_changed("A");
        q.topic_changed("B");
        assert_eq!(q.take(), Some(RegistrationWork::Topics(vec!["A".into(), "B".into()])));
        assert_eq!(q.take(), None, "taken once");
    }

    #[test]
    fn a_full_registration_absorbs_topic_changes() {
        let mut q = RegistrationQueue::default();
        q.topic_changed("A");
        q.request_full();
        q.topic_changed("B");
        assert_eq!(q.take(), Some(RegistrationWork::Full));
        assert_eq!(q.take(), None);
    }

    #[test]
    fn too_many_changes_become_one_full_registration() {
        let mut q = RegistrationQueue::default();
        for i in 0..SINGLE_TOPIC_BATCH_MAX {
            q.topic_changed(&format!("T{i}"));
        }
        assert!(matches!(q.take(), Some(RegistrationWork::Topics(t)) if t.len() == SINGLE_TOPIC_BATCH_MAX));
        for i in 0..=SINGLE_TOPIC_BATCH_MAX {
            q.topic_changed(&format!("T{i}"));
        }
        assert_eq!(q.take(), Some(RegistrationWork::Full));
        assert_eq!(q.take(), None);
    }
}
