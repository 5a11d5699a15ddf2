//! The pod: its description (the pod file), presets, and the model built from it.

pub mod config;
pub mod faults;
pub mod presets;
pub mod timing;
pub mod topology;

pub use self::config::{PodError, PodFile};
