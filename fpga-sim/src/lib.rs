//! # podlink-sim
//!
//! A cycle-approximate simulator of whole podlink pods: the digital twin. It runs the real
//! protocol code over modelled links and switch pipelines and checks latency budgets.
//!
//! * [`engine`]: the deterministic discrete-event engine (picosecond time, stable tie-break).
//! * [`sim`]: the pod model (accelerators, links, switches) and [`sim::results::run`].

pub mod engine;
pub mod pod;
pub mod report;
pub mod rng;
pub mod sim;
pub mod verify;
pub mod workload;
