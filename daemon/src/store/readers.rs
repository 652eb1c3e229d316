//! A small pool of read-only connections. Queries run on tokio's blocking threads, so a slow one
//! never stalls the socket or the writer.

use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

const KEEP: usize = 4;

#[derive(Clone)]
pub struct Readers {
    path: PathBuf,
    pool: Arc<Mutex<Vec<Connection>>>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("database read failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("query task failed: {0}")]
    Join(String),
}

impl Readers {
    pub fn new(path: PathBuf) -> Readers {
        Readers {
            path,
            pool: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Run `f` on a read-only connection, off the async threads.
    pub async fn run<T, F>(&self, f: F) -> Result<T, ReadError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.run_blocking(f))
            .await
            .map_err(|e| ReadError::Join(e.to_string()))?
    }

    /// Run `f` on a connection of its own, closed afterwards: for whole-table scans (status
    /// counts) that would otherwise fill a pooled connection's page cache with pages no query
    /// needs, and keep them in memory.
    pub async fn run_once<T, F>(&self, f: F) -> Result<T, ReadError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            let conn = super::schema::open_reader(&path)?;
            conn.execute_batch("PRAGMA cache_size = -1024;")?;
            Ok(f(&conn)?)
        })
        .await
        .map_err(|e| ReadError::Join(e.to_string()))?
    }

    pub fn run_blocking<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, ReadError> {
        let conn = self.pool.lock().unwrap().pop();
        let conn = match conn {
            Some(c) => c,
            None => super::schema::open_reader(&self.path)?,
        };
        let out = f(&conn);
        let mut pool = self.pool.lock().unwrap();
        if pool.len() < KEEP {
            pool.push(conn);
        }
        Ok(out?)
    }
}
