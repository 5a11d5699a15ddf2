//! BookSim-comparable mode (placeholder while being built).
pub mod rng;
