//! The interruption runtime: call budgets, detached jobs, progress, checkpoints and the
//! INCOMPLETE response ("Work Outlives the Caller's Budget").
//!
//! (The integration guide is completed below as the modules land.)

pub mod budget;
pub mod checkpoint;
pub mod context;
pub mod fsutil;
pub mod identity;
pub mod ids;
pub mod incomplete;
pub mod jobs;
pub mod process;
pub mod progress;
pub mod quote;
pub mod stop;
pub mod wake;
pub mod warning;
pub mod worker;
