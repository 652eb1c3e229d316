//! The database: schema and migrations ([`schema`]), the single writer with group commit
//! ([`writer`]), the read-only connections that serve queries ([`readers`]), deferred full-text
//! indexing ([`fts`]) and the identifier words it indexes besides the text ([`terms`]);
//! the follow-ups of its inserts that were triggers until migration 011 ([`follow`]);
//! [`bm25`], FTS5's ranking function with each phrase's row count remembered per index state;
//! [`sql_trace`], per-statement SQLite counters for diagnosis (`NMEM_SQL_TRACE`).

pub mod bm25;
pub mod checkpointer;
pub mod follow;
pub mod fts;
pub mod project_ids;
pub mod readers;
pub mod schema;
pub mod sql_trace;
pub mod terms;
pub mod upgrade;
pub mod walbuf;
pub mod writer;
