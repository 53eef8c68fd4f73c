//! The interruption runtime: call budgets, detached jobs, progress, checkpoints and the
//! INCOMPLETE response ("Work Outlives the Caller's Budget").
