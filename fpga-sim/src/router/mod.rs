//! Flit-level model of an input-queued virtual-channel router (`spec-notes/validation.md#booksim`).
//!
//! The model is BookSim2's `iq` router, rebuilt so the pod simulator can put its switches on
//! it and the `booksim` mode can check it against BookSim's own numbers:
//!
//! * P inputs and outputs, V VCs per port with private buffers of `vc_buf_size` flits, and
//!   credit-based flow control ([`BufferState`] per output);
//! * a pipeline of route computation, VC allocation, switch allocation and switch traversal
//!   with BookSim's stage delays, optional speculation, input/output/internal speedup;
//! * separable input-first allocators with round-robin arbiters;
//! * packets of head/body/tail flits; a packet holds its output VC from head to tail;
//! * a caller-supplied [`RoutingFunction`], so the pod simulator plugs in the switch
//!   library's forwarding decision; flits carry an opaque `u32` payload handle.
//!
//! Guarantees: deterministic (no clock, no randomness, no hash maps); no allocation per flit
//! once built (rings and tables are sized at construction); no panic on bad input (flits on
//! unknown ports or VCs, buffer overflows, bogus credits and out-of-range routes come back
//! as [`RouterError`]).
//!
//! ```
//! use podlink_sim::router::{Flit, IqRouter, Route, RouterConfig, RoutingFunction};
//!
//! struct ToDest; // output port = destination
//! impl RoutingFunction for ToDest {
//!     fn route(&mut self, _router: u32, _in_port: usize, f: &Flit) -> Route {
//!         Route::new(f.dest as u16, 0, 3)
//!     }
//! }
//!
//! let cfg = RouterConfig { inputs: 4, outputs: 4, vcs: 4, ..RouterConfig::default() };
//! let mut r = IqRouter::new(0, &cfg).unwrap();
//! r.handle_flit(0, Flit::new(42, 3, true, true)).unwrap();
//! let mut sent = Vec::new();
//! for now in 0..8 {
//!     r.step(now, &mut ToDest).unwrap();
//!     r.poll_flits(|port, f| sent.push((now, port, f.payload)));
//!     r.poll_credits(|_input, _credit| {});
//! }
//! assert_eq!(sent, vec![(3, 3, 42)]); // route, VC alloc, switch alloc, crossbar
//! ```

mod alloc;
mod buffer_state;
mod config;
mod flit;
mod iq;
mod ring;

pub use buffer_state::BufferState;
pub use config::{AllocatorKind, RouterConfig, RouterConfigError, MAX_VCS};
pub use flit::{Credit, Flit, Route};
pub use iq::{IqRouter, RouterStats, RoutingFunction};

use thiserror::Error;

/// Something a router was handed, or computed from what it was handed, that it cannot accept.
/// Every variant is fatal for the run: the router's state is no longer trustworthy.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum RouterError {
    /// A port number the router does not have.
    #[error("port {port} does not exist on this router")]
    BadPort {
        /// The port.
        port: usize,
    },
    /// A VC number the router does not have.
    #[error("VC {vc} does not exist on this router")]
    BadVc {
        /// The VC.
        vc: u8,
    },
    /// Two flits on one input in one cycle.
    #[error("input {input} received two flits in one cycle")]
    InputBusy {
        /// The input.
        input: usize,
    },
    /// A flit arrived for a full VC buffer (the sender ignored credits).
    #[error("input {input} VC {vc}: buffer overflow")]
    BufferOverflow {
        /// The input.
        input: usize,
        /// The VC.
        vc: u8,
    },
    /// A packet's first flit was not a head flit.
    #[error("input {input} VC {vc}: a packet must start with a head flit")]
    NotHead {
        /// The input.
        input: usize,
        /// The VC.
        vc: u8,
    },
    /// The routing function returned an output or VC range the router does not have.
    #[error("route to port {port} VCs {vc_lo}..={vc_hi} is outside the router")]
    BadRoute {
        /// The port returned.
        port: u16,
        /// First VC returned.
        vc_lo: u8,
        /// Last VC returned.
        vc_hi: u8,
    },
    /// An output VC was taken while a packet still held it.
    #[error("downstream VC {vc} taken while in use")]
    VcTaken {
        /// The VC.
        vc: u8,
    },
    /// A flit was sent without a credit.
    #[error("downstream VC {vc}: flit sent without credit")]
    NoCredit {
        /// The VC.
        vc: u8,
    },
    /// A credit for a VC holding no flit.
    #[error("downstream VC {vc}: more credits returned than flits sent")]
    CreditUnderflow {
        /// The VC.
        vc: u8,
    },
    /// A downstream buffer size of zero (or above 65535).
    #[error("output {output}: {vc_buf_size} flit slots per VC (need 1..=65535)")]
    BadBufferSize {
        /// The output.
        output: usize,
        /// The size asked for.
        vc_buf_size: usize,
    },
    /// A downstream buffer was resized while flits or packets were outstanding on it.
    #[error("output {output} has flits or packets outstanding")]
    OutputBusy {
        /// The output.
        output: usize,
    },
    /// A switch grant won speculatively for one element of a two-element route completed
    /// after VC allocation gave the packet a VC at the other element's output (a switch
    /// allocation slower than VC allocation). BookSim asserts here (`GetOutputPort(vc) ==
    /// output` in `_SWAllocEvaluate`) and, built without assertions, sends the flit to the
    /// wrong output.
    #[error(
        "input {input} VC {vc}: a speculative switch grant for output {granted} outlived the VC \
         allocation to output {allocated} (BookSim2 asserts)"
    )]
    SplitSpeculation {
        /// The input.
        input: usize,
        /// The VC.
        vc: u8,
        /// The output the switch granted.
        granted: usize,
        /// The output VC allocation gave.
        allocated: usize,
    },
    /// With `wait_for_tail_credit`, a credit for a VC no packet holds.
    #[error("downstream VC {vc}: credit for an idle VC")]
    CreditForIdleVc {
        /// The VC.
        vc: u8,
    },
}
