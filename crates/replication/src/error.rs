//! Why a put's replicas did not acknowledge it. The broker maps these to response codes in
//! its send processor: `NotAvailable` to SLAVE_NOT_AVAILABLE (11), `Timeout` to
//! FLUSH_SLAVE_TIMEOUT (12), `NotEnoughInSync` to SYSTEM_ERROR (Java's
//! IN_SYNC_REPLICAS_NOT_ENOUGH), `ShutDown` to SERVICE_NOT_AVAILABLE (14).

/// A replica wait that did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplicaWaitError {
    /// Too few slaves are connected within `haMaxGapNotInSync` for the acknowledgements
    /// needed; the put does not wait. Java: `SLAVE_NOT_AVAILABLE`.
    #[error("slave not available: {in_sync} replicas in sync (master included), {needed} needed")]
    NotAvailable {
        /// Replicas in sync now, the master included.
        in_sync: u32,
        /// Acknowledgements needed, the master included.
        needed: u32,
    },
    /// The replicas did not acknowledge within the timeout. Java: `FLUSH_SLAVE_TIMEOUT`.
    #[error("replicas did not acknowledge offset {next_offset} in time ({acked} of {needed} acknowledgements)")]
    Timeout {
        /// The offset waited for.
        next_offset: i64,
        /// Acknowledgements at the deadline, the master included.
        acked: u32,
        /// Acknowledgements needed, the master included.
        needed: u32,
    },
    /// With `enableAutoInSyncReplicas`, fewer replicas are in sync than `minInSyncReplicas`.
    /// Java: `IN_SYNC_REPLICAS_NOT_ENOUGH`.
    #[error("in-sync replicas not enough: {in_sync} in sync, {needed} needed")]
    NotEnoughInSync {
        /// Replicas in sync now, the master included.
        in_sync: u32,
        /// Acknowledgements needed, the master included.
        needed: u32,
    },
    /// The HA service stopped while the put waited.
    #[error("the HA service is shut down")]
    ShutDown,
}
