//! The mio event loop and connections.
