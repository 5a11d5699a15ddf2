//! Hardware through embedded-hal 1.0 and embedded-io traits only.
