//! The requester's public types: settings, handles, completions, read data, events and
//! counters (`spec-notes/transactions.md#requester`).

use super::request::OpKind;
use super::OrderingMode;
use super::TxnError;
use crate::time::Duration;
use crate::wire::{AccelId, PartitionId, Tag};

/// Requester settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequesterConfig {
    /// This accelerator (the `srcaccid` of every request).
    pub local: AccelId,
    /// This accelerator's partition.
    pub partition: PartitionId,
    /// Ordering rule.
    pub ordering: OrderingMode,
    /// A request not answered this long after it was sent completes its operation with
    /// [`TxnError::Timeout`].
    pub request_timeout: Duration,
    /// An operation whose requests could not all be sent this long after submission
    /// (no credits, no tags) completes with [`TxnError::Timeout`].
    pub queue_timeout: Duration,
    /// A timed-out tag is not reused for this long, so a late response is recognised.
    pub tag_quarantine: Duration,
    /// Compress eligible requests with the address-compression cache (the completer at the
    /// other end of the link must see every request, in order).
    pub compress_requests: bool,
    /// The first tag on the wire: the requester's tags are `tag_base..tag_base + TAGS`
    /// (moved down so that they fit in 11 bits). Requesters of one accelerator whose
    /// responses can arrive at each other's ports (several ports into one switch) use
    /// disjoint ranges, so a response can be handed to its requester by tag and a switch sees
    /// an accelerator's tags unique (`spec-notes/transactions.md#tags`).
    pub tag_base: u16,
}

impl RequesterConfig {
    /// Defaults: per-region ordering, 1 ms timeouts, 1 ms quarantine, partition 0.
    pub const fn new(local: AccelId) -> Self {
        RequesterConfig {
            local,
            partition: PartitionId::from_bits_truncate(0),
            ordering: OrderingMode::PerRegion,
            request_timeout: Duration::from_ms(1),
            queue_timeout: Duration::from_ms(1),
            tag_quarantine: Duration::from_ms(1),
            compress_requests: false,
            tag_base: 0,
        }
    }
}

/// The handle of a submitted operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub u32);

/// An operation finished: reported once by [`Requester::poll_completion`](super::Requester::poll_completion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The operation.
    pub id: OpId,
    /// Its kind.
    pub kind: OpKind,
    /// `Ok(Some(old))` for an AtomicR, `Ok(None)` otherwise; or the first error.
    pub result: Result<Option<u64>, TxnError>,
}

/// Read data that arrived for an operation, borrowed from the response item.
///
/// Valid only if the operation later completes with `Ok`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadData<'a> {
    /// The read operation.
    pub op: OpId,
    /// Offset of `data` from the operation's first byte.
    pub offset: u32,
    /// The bytes.
    pub data: &'a [u8],
}

/// Why the requester dropped a response (`spec-notes/transactions.md#response-validation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// The field is not a response.
    NotAResponse,
    /// The response is addressed to another accelerator.
    WrongDestination,
    /// No request with this tag is in flight.
    UnknownTag,
    /// The request with this tag already timed out.
    Late,
    /// The response comes from another accelerator than the request went to, or on
    /// another VC.
    WrongSource,
    /// A write-type response to a read, or the reverse.
    WrongKind,
    /// The data does not fit the field, or the field's beats do not fit the request.
    WrongLength,
    /// These beats were already received.
    Duplicate,
}

/// Something worth knowing that is not a completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequesterEvent {
    /// A response was dropped (and counted).
    ResponseDropped {
        /// Why.
        reason: DropReason,
        /// Its tag.
        tag: Tag,
        /// Its source, when the field carries one.
        src: Option<AccelId>,
    },
    /// A request was not answered in time (`tag` = `None`: the operation timed out
    /// before all its requests were sent).
    TimedOut {
        /// The operation.
        op: OpId,
        /// The request's tag.
        tag: Option<Tag>,
    },
}

/// Requester counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequesterStats {
    /// Operations accepted.
    pub ops_submitted: u64,
    /// Operations completed successfully.
    pub ops_ok: u64,
    /// Operations completed with an error.
    pub ops_failed: u64,
    /// Requests sent.
    pub requests_sent: u64,
    /// Responses accepted.
    pub responses_accepted: u64,
    /// Responses dropped, all reasons.
    pub responses_dropped: u64,
    /// … with a tag that is not in flight.
    pub dropped_unknown_tag: u64,
    /// … for a request that had already timed out.
    pub dropped_late: u64,
    /// … from the wrong accelerator or on the wrong VC.
    pub dropped_wrong_source: u64,
    /// … whose beats were already received.
    pub dropped_duplicate: u64,
    /// … whose length or kind disagrees with the request.
    pub dropped_wrong_length: u64,
    /// … for another reason (not a response, wrong destination).
    pub dropped_other: u64,
    /// Requests that timed out.
    pub request_timeouts: u64,
    /// Operations that timed out waiting to be sent.
    pub queue_timeouts: u64,
    /// Transmit attempts that found no credits.
    pub credit_stalls: u64,
    /// Transmit attempts that found no free tag.
    pub tag_stalls: u64,
    /// Responses carrying poisoned data.
    pub poisoned: u64,
    /// Operations refused locally or answered "partition denied".
    pub partition_denied: u64,
    /// Events discarded because the event queue was full.
    pub events_lost: u64,
    /// Operations abandoned by [`Requester::abort`](super::Requester::abort).
    pub ops_aborted: u64,
    /// Requests in flight (sent, not answered) that [`Requester::abort`](super::Requester::abort)
    /// gave up: like a timed-out request, each leaves a late response, or its request or
    /// response was lost.
    pub requests_abandoned: u64,
}
