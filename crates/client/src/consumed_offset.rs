//! The consumed offset a consumer keeps for each of its queues, and committing the ones the
//! broker (or the local offset file) does not have yet. Shared by the push and the lite pull
//! consumer. Java: `RemoteBrokerOffsetStore`'s offset table and `persistAll`.

use std::future::Future;

use ferromq_protocol::body::MessageQueue;
use tracing::warn;

use crate::error::ClientError;

/// The next offset to consume of one queue, once known, and whether it still has to be
/// committed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ConsumedOffset {
    next: Option<i64>,
    unsaved: bool,
}

impl ConsumedOffset {
    /// The next offset to consume, once known.
    pub(crate) fn get(&self) -> Option<i64> {
        self.next
    }

    /// Consumption moved to `offset` (a consumed batch, a seek): to be committed.
    pub(crate) fn set(&mut self, offset: i64) {
        self.next = Some(offset);
        self.unsaved = true;
    }

    /// As [`set`](Self::set), but only forward.
    pub(crate) fn advance(&mut self, offset: i64) {
        if self.next.is_none_or(|c| offset > c) {
            self.set(offset);
        }
    }

    /// Where the queue starts when nothing is known yet; it came from the broker (or the
    /// consume-from rule), so there is nothing to commit.
    pub(crate) fn start_at(&mut self, offset: i64) {
        self.next.get_or_insert(offset);
    }

    /// The offset to commit, if it is not committed yet.
    pub(crate) fn unsaved(&self) -> Option<i64> {
        self.next.filter(|_| self.unsaved)
    }

    /// `offset` is committed where it is safe; the queue is clean unless consumption moved
    /// on meanwhile.
    pub(crate) fn saved(&mut self, offset: i64) {
        if self.next == Some(offset) {
            self.unsaved = false;
        }
    }
}

/// The queues whose offsets are not committed yet, with those offsets.
pub(crate) fn unsaved_offsets<'a>(
    queues: impl Iterator<Item = (&'a MessageQueue, &'a ConsumedOffset)>,
) -> Vec<(MessageQueue, i64)> {
    queues.filter_map(|(mq, o)| o.unsaved().map(|offset| (mq.clone(), offset))).collect()
}

/// Commits each of `unsaved` with `commit`, which says whether the offset is now safe (on
/// the master, or in the local file; one on a slave is committed again next time), and then
/// calls `saved` for it. Every queue is tried; failures are logged and the first returned.
pub(crate) async fn commit_unsaved<Fut>(
    unsaved: Vec<(MessageQueue, i64)>,
    commit: impl Fn(MessageQueue, i64) -> Fut,
    mut saved: impl FnMut(&MessageQueue, i64),
) -> Result<(), ClientError>
where
    Fut: Future<Output = Result<bool, ClientError>>,
{
    let mut first_err = None;
    for (mq, offset) in unsaved {
        match commit(mq.clone(), offset).await {
            Ok(true) => saved(&mq, offset),
            Ok(false) => {}
            Err(e) => {
                warn!(topic = %mq.topic, queue_id = mq.queue_id, error = %e, "commit failed");
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offset_is_unsaved_until_committed_and_moving_on_keeps_it_unsaved() {
        let mut o = ConsumedOffset::default();
        o.start_at(5);
        assert_eq!((o.get(), o.unsaved()), (Some(5), None), "a start offset is not committed back");
        o.start_at(9);
        assert_eq!(o.get(), Some(5), "a start offset never replaces a known one");
        o.set(7);
        assert_eq!(o.unsaved(), Some(7));
        o.advance(6);
        assert_eq!(o.get(), Some(7), "advance only moves forward");
        o.advance(8);
        o.saved(7);
        assert_eq!(o.unsaved(), Some(8), "committing an older offset leaves the newer one unsaved");
        o.saved(8);
        assert_eq!(o.unsaved(), None);
        o.set(3);
        assert_eq!(o.unsaved(), Some(3), "a seek backwards is committed too");
    }

    #[tokio::test]
    async fn every_queue_is_tried_and_only_safe_commits_are_marked_saved() {
        let q = |id| MessageQueue::new("T", "b", id);
        let unsaved = vec![(q(0), 10), (q(1), 11), (q(2), 12)];
        let mut marked = Vec::new();
        let result = commit_unsaved(
            unsaved,
            |mq, _| async move {
                match mq.queue_id {
                    0 => Ok(true),
                    1 => Err(ClientError::IllegalState { group: "G".into(), reason: "down".into() }),
                    _ => Ok(false),
                }
            },
            |mq, o| marked.push((mq.queue_id, o)),
        )
        .await;
        assert!(matches!(result, Err(ClientError::IllegalState { .. })));
        assert_eq!(marked, [(0, 10)], "the failed and the slave commit stay unsaved");
    }
}
