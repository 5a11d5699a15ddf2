//! # podlink-sim
//!
//! A cycle-approximate simulator of whole podlink pods: the digital twin. It runs the real
//! protocol code over modelled links and switch pipelines and checks latency budgets.
//!
//! * [`engine`]: the deterministic discrete-event engine (picosecond time, stable tie-break).
//! * [`sim`]: the pod model (accelerators, links, switches) and [`sim::results::run`].
//! * [`router`]: the flit-level input-queued VC router (pipeline, allocators, credits).
//! * [`booksim`]: the BookSim-comparable mode that validates the router model.
//! * [`conformance`]: named fault scenarios judged by explicit criteria.

pub mod booksim;
pub mod conformance;
pub mod engine;
pub mod export;
pub mod pod;
pub mod report;
pub mod rng;
pub mod router;
pub mod sim;
pub mod verify;
pub mod workload;
