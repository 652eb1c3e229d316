//! The database: schema and migrations ([`schema`]), the single writer with group commit
//! ([`writer`]), the read-only connections that serve queries ([`readers`]), deferred full-text
//! indexing ([`fts`]) and the identifier words it indexes besides the text ([`terms`]).

pub mod fts;
pub mod readers;
pub mod schema;
pub mod terms;
pub mod upgrade;
pub mod writer;
