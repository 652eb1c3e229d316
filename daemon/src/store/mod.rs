//! The database: schema and migrations ([`schema`]), the single writer with group commit
//! ([`writer`]), and the read-only connections that serve queries ([`readers`]).

pub mod fts;
pub mod readers;
pub mod schema;
pub mod writer;
