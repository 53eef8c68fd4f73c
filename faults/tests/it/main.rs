//! The faulty binary's own tests: each fault changes reftool the way its scenario expects to
//! see, and without a fault the binary is reftool.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod argument_order;
mod support;
mod without_a_fault;
