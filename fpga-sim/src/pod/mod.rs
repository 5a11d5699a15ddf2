//! The pod: its description (the pod file), presets, and the model built from it.

pub mod config;
pub mod presets;

pub use self::config::{PodError, PodFile};
