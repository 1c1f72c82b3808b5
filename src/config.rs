//! Flags and configuration.
