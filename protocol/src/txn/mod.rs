//! The transaction layer: memory-semantic reads, writes, atomics and write messages between
//! accelerators (`spec-notes/transactions.md`).
//!
//! * [`Requester`] turns [`Operation`]s into tagged TL requests — split into 64–256 B
//!   pieces that never cross a 256 B boundary — and matches responses back to them, with
//!   per-request timeouts, response validation and the ordering rule of [`OrderingMode`].
//! * [`Completer`] executes requests against a [`MemoryTarget`], refuses requesters from
//!   other partitions, and answers with a [`Status`] and data beats.
//! * Both exchange [`TlTransfer`](crate::wire::TlTransfer)s — the TL packer's item: a
//!   control field plus its data — and take or return TL credits through a [`CreditGate`]
//!   that the link layer provides.
//!
//! Everything is sans-IO: `now` is an argument, outputs are polled, storage is bounded by
//! const generics, and no input makes anything panic.
//!
//! ```
//! use podlink_protocol::time::Instant;
//! use podlink_protocol::txn::*;
//! use podlink_protocol::wire::{AccelId, PartitionId, Vc};
//!
//! let (a, b) = (AccelId::new(1).unwrap(), AccelId::new(2).unwrap());
//! let mut req: Requester<16, 4, 8> = Requester::new(RequesterConfig::new(a));
//! let mut cpl: Completer<4> =
//!     Completer::new(CompleterConfig::new(b), PartitionTable::all_in(PartitionId::default()));
//! let mut mem: WindowMemory<1024> = WindowMemory::new(0);
//! let now = Instant::ZERO;
//!
//! req.submit_write(now, b, Vc::default(), 100, b"hello", None).unwrap();
//! let rd = req.submit_read(now, b, Vc::default(), 100, 5).unwrap();
//! while let Some(request) = req.poll_transmit(now, &mut Unlimited) {
//!     cpl.handle_request(now, &request, &mut mem, &mut Unlimited).unwrap();
//! }
//! let mut got = Vec::new();
//! while let Some(response) = cpl.poll_transmit(now, &mut Unlimited) {
//!     if let Some(d) = req.handle_response(now, &response, &mut Unlimited) {
//!         assert_eq!(d.op, rd);
//!         got.extend_from_slice(d.data);
//!     }
//! }
//! assert_eq!(got, b"hello");
//! assert!(req.poll_completion().unwrap().result.is_ok());
//! assert!(req.poll_completion().unwrap().result.is_ok());
//! ```

mod atomic;
mod buf;
mod completer;
mod credit;
mod enables;
mod endpoint;
mod endpoint_rx;
mod partition;
mod queue;
mod request;
mod requester;
mod requester_types;
mod status;
mod tags;
mod target;

pub use self::atomic::{Atomic, AtomicError, AtomicOp, AtomicSize};
pub use self::buf::TransferBuf;
pub use self::completer::{
    Completer, CompleterBusy, CompleterConfig, CompleterEvent, CompleterStats,
};
pub use self::credit::{CreditGate, Flow, Pool, Unlimited};
pub use self::enables::{ByteEnables, REGION_BYTES};
pub use self::endpoint::{Endpoint, EndpointConfig, EndpointEvent, EndpointStats, ReadSink};
pub use self::partition::PartitionTable;
pub use self::request::{OpKind, Operation, Request, SubmitError, ADDR_LIMIT};
pub use self::requester::Requester;
pub use self::requester_types::{
    Completion, DropReason, OpId, ReadData, RequesterConfig, RequesterEvent, RequesterStats,
};
pub use self::status::Status;
pub use self::target::{MemoryTarget, TargetError, WindowMemory};

use core::fmt;

/// Which requests keep their order (`spec-notes/transactions.md#ordering`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OrderingMode {
    /// Requests with the same (source, destination, VC, 256 B region) leave in submission
    /// order; others may pass a request that waits for credits.
    #[default]
    PerRegion,
    /// Every request leaves in submission order (required with link security).
    Strict,
}

/// Why an operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxnError {
    /// A request was not answered in time, or the operation could not be sent in time.
    Timeout,
    /// The completer answered with this error status.
    Status(Status),
    /// Response data arrived poisoned; it was not delivered.
    Poisoned,
    /// The port's link was reported down: the operation was abandoned
    /// ([`Requester::abort`](requester::Requester::abort)).
    LinkDown,
}

impl fmt::Display for TxnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TxnError::Timeout => f.write_str("timed out"),
            TxnError::Status(s) => write!(f, "completer answered {s}"),
            TxnError::Poisoned => f.write_str("poisoned data"),
            TxnError::LinkDown => f.write_str("link reported down"),
        }
    }
}

impl core::error::Error for TxnError {}
