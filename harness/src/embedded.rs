//! The files compiled into the binary (by `build.rs`): the scenario catalogue and the
//! wire-format JSON Schemas, so that an installed `conform` needs no checkout beside it.

include!(concat!(env!("OUT_DIR"), "/embedded.rs"));
