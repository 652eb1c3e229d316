//! The embedding crate's integration tests, one binary (each test binary is a link of its own).
//! The engine's modules need the `engine` feature.

mod common;

#[cfg(feature = "engine")]
mod child;
#[cfg(feature = "engine")]
mod engine;
mod model;
#[cfg(feature = "engine")]
mod real_model;
