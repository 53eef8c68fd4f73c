//! The process driver against real processes.
