//! # podlink-sim
//!
//! A cycle-approximate simulator of whole podlink pods: the digital twin. It runs the real
//! protocol code over modelled links and switch pipelines and checks latency budgets.
//!
//! * [`engine`]: the deterministic discrete-event engine (picosecond time, stable tie-break).

pub mod engine;
pub mod pod;
pub mod report;
pub mod rng;
pub mod verify;
pub mod workload;
