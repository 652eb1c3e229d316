//! `nmem_bm25`: SQLite's FTS5 `bm25()` with each phrase's row count remembered.
//!
//! Why: `bm25()` needs, for every phrase of the query, how many rows of the whole table match it
//! (its inverse document frequency), and FTS5 counts them by walking the phrase's entire doclist
//! once per statement. At 1M observations a common word ("test", "cargo") matches hundreds of
//! thousands of rows: measured with callgrind on the bench's queries, 89% of lexical search was
//! these counts, although only the newest few hundred matches are ranked. Here they are counted
//! once per index state and reused until the index changes.
//!
//! Exactness: the score is `bm25()`'s, operation for operation (fts5_aux.c, SQLite 3.50), so
//! rankings do not move. A count is reused only under the same *index signature*: the FTS5
//! table's averages record (row and token totals) and structure record (every segment, the
//! write counter, tombstones), read by the caller in the same read transaction as the query and
//! passed as the function's last argument. Any insert, delete or merge rewrites the structure
//! record, so a count is never used for an index it was not counted on. Without a signature (a
//! NULL last argument, or fewer arguments) nothing is remembered. The phrase is identified by
//! its query tokens (`xQueryToken`); callers pass a signature only for queries without column
//! filters (a column filter changes what a phrase counts).

use rusqlite::ffi;
use rusqlite::Connection;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void};
use std::sync::{Arc, Mutex};

/// Index states remembered at once per table (the newest; a request still reading an older
/// snapshot finds its own). Per table: a write changes one table's index, and the other
/// tables' counts stay good (one slot list for all tables let each write to the observations
/// evict the unchanged prompts' counts, so a search after a write walked both: at 1M rows the
/// prompts' walk was as long as the observations').
const STATES: usize = 4;
/// Phrases remembered per state (a few bytes each); past it, that state starts afresh.
const PHRASES: usize = 4096;

/// The remembered counts, shared by the reader connections of one database.
#[derive(Default)]
pub struct DocFreq {
    inner: Mutex<Inner>,
}

/// Phrase tokens → rows matched.
type Counts = HashMap<Vec<u8>, i64>;

#[derive(Default)]
struct Inner {
    /// (signature, phrase tokens → rows matched), newest last.
    states: Vec<(Vec<u8>, Counts)>,
    /// Counts walked (for tests and figures).
    walked: u64,
}

impl DocFreq {
    fn get(&self, sig: &[u8], phrase: &[u8]) -> Option<i64> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .states
            .iter()
            .find(|(s, _)| s == sig)
            .and_then(|(_, m)| m.get(phrase).copied())
    }

    fn put(&self, sig: &[u8], phrase: Vec<u8>, n: i64) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.walked += 1;
        let at = match inner.states.iter().position(|(s, _)| s == sig) {
            Some(i) => i,
            None => {
                let table = table_of(sig);
                let same: Vec<usize> = (0..inner.states.len())
                    .filter(|&i| table_of(&inner.states[i].0) == table)
                    .collect();
                if same.len() >= STATES {
                    inner.states.remove(same[0]);
                }
                inner.states.push((sig.to_vec(), HashMap::new()));
                inner.states.len() - 1
            }
        };
        let map = &mut inner.states[at].1;
        if map.len() >= PHRASES {
            map.clear();
        }
        map.insert(phrase, n);
    }

    /// How many phrase counts were walked (not found remembered) so far.
    pub fn walked(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).walked
    }
}

/// The table a signature is of: its bytes up to the first NUL ([`signature`] puts one after
/// the table's name).
fn table_of(sig: &[u8]) -> &[u8] {
    sig.split(|&b| b == 0).next().unwrap_or(sig)
}

/// The signature of an FTS5 table's index (`table` is `observations_fts` or `prompts_fts`): its
/// name, a NUL, then its averages (id 1) and structure (id 10) records. Read it in the
/// transaction that runs the query.
pub fn signature(c: &Connection, table: &str) -> rusqlite::Result<Vec<u8>> {
    let mut stmt = c.prepare_cached(&format!(
        "SELECT block FROM {table}_data WHERE id IN (1, 10) ORDER BY id"
    ))?;
    let mut rows = stmt.query([])?;
    let mut sig = table.as_bytes().to_vec();
    sig.push(0);
    while let Some(r) = rows.next()? {
        let b = r.get_ref(0)?.as_blob_or_null()?.unwrap_or_default();
        sig.extend_from_slice(&(b.len() as u64).to_le_bytes());
        sig.extend_from_slice(b);
    }
    Ok(sig)
}

/// Register `nmem_bm25` on a connection, remembering counts in `cache`.
pub fn register(c: &Connection, cache: Arc<DocFreq>) -> rusqlite::Result<()> {
    // SAFETY: the handle is the live connection's; `fts5(?1)` writes the API pointer into
    // `api` through the pointer binding (the documented way to get it), and the statement is
    // finalised before `api` goes out of scope.
    unsafe {
        let db = c.handle();
        let mut api: *mut ffi::fts5_api = std::ptr::null_mut();
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        let rc = ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            std::ptr::null_mut(),
        );
        if rc != ffi::SQLITE_OK {
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
        }
        ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&mut api as *mut *mut ffi::fts5_api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
        let create = match api.as_ref().and_then(|a| a.xCreateFunction) {
            Some(f) if (*api).iVersion >= 2 => f,
            _ => {
                return Err(rusqlite::Error::SqliteFailure(
                    ffi::Error::new(ffi::SQLITE_ERROR),
                    Some("FTS5 is not available".into()),
                ))
            }
        };
        let user = Arc::into_raw(cache) as *mut c_void;
        let rc = create(
            api,
            c"nmem_bm25".as_ptr(),
            user,
            Some(nmem_bm25),
            Some(drop_cache),
        );
        if rc != ffi::SQLITE_OK {
            drop(Arc::from_raw(user as *const DocFreq));
            return Err(rusqlite::Error::SqliteFailure(ffi::Error::new(rc), None));
        }
    }
    Ok(())
}

unsafe extern "C" fn drop_cache(p: *mut c_void) {
    // SAFETY: `p` is the `Arc::into_raw` of `register`, released once, when SQLite drops the
    // function (the connection closes or it is registered again).
    drop(Arc::from_raw(p as *const DocFreq));
}

/// Computed once per statement, as `bm25()`'s `Fts5Bm25Data`.
struct Data {
    avgdl: f64,
    idf: Vec<f64>,
    freq: Vec<f64>,
}

unsafe extern "C" fn drop_data(p: *mut c_void) {
    // SAFETY: `p` is the `Box::into_raw` of `data`, given to `xSetAuxdata`, freed once by it.
    drop(Box::from_raw(p as *mut Data));
}

unsafe extern "C" fn count_cb(
    _api: *const ffi::Fts5ExtensionApi,
    _fts: *mut ffi::Fts5Context,
    user: *mut c_void,
) -> c_int {
    *(user as *mut i64) += 1;
    ffi::SQLITE_OK
}

/// The phrase's query tokens, length-prefixed, or `None` when the API cannot say.
unsafe fn phrase_key(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    phrase: c_int,
) -> Option<Vec<u8>> {
    let size = api.xPhraseSize?;
    let token = if api.iVersion >= 3 {
        api.xQueryToken?
    } else {
        return None;
    };
    let mut key = Vec::new();
    for t in 0..size(fts, phrase) {
        let mut p: *const c_char = std::ptr::null();
        let mut n: c_int = 0;
        if token(fts, phrase, t, &mut p, &mut n) != ffi::SQLITE_OK || p.is_null() || n < 0 {
            return None;
        }
        key.extend_from_slice(&(n as u32).to_le_bytes());
        key.extend_from_slice(std::slice::from_raw_parts(p.cast::<u8>(), n as usize));
    }
    Some(key)
}

/// `fts5Bm25GetData`: the statement's averages and IDFs, counting each phrase's rows only when
/// this index state has not counted them before.
unsafe fn data<'a>(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    sig: Option<&[u8]>,
) -> Result<&'a mut Data, c_int> {
    let (get, set) = match (api.xGetAuxdata, api.xSetAuxdata) {
        (Some(g), Some(s)) => (g, s),
        _ => return Err(ffi::SQLITE_ERROR),
    };
    let p = get(fts, 0) as *mut Data;
    if !p.is_null() {
        return Ok(&mut *p);
    }
    let (Some(phrases), Some(row_count), Some(total), Some(query), Some(user)) = (
        api.xPhraseCount,
        api.xRowCount,
        api.xColumnTotalSize,
        api.xQueryPhrase,
        api.xUserData,
    ) else {
        return Err(ffi::SQLITE_ERROR);
    };
    let cache = &*(user(fts) as *const DocFreq);
    let n_phrase = phrases(fts).max(0) as usize;
    let mut n_row: i64 = 0;
    let mut n_token: i64 = 0;
    let rc = row_count(fts, &mut n_row);
    if rc != ffi::SQLITE_OK {
        return Err(rc);
    }
    let rc = total(fts, -1, &mut n_token);
    if rc != ffi::SQLITE_OK {
        return Err(rc);
    }
    let mut d = Box::new(Data {
        avgdl: n_token as f64 / n_row as f64,
        idf: vec![0.0; n_phrase],
        freq: vec![0.0; n_phrase],
    });
    for i in 0..n_phrase {
        let key = match sig {
            Some(_) => phrase_key(api, fts, i as c_int),
            None => None,
        };
        let known = match (sig, &key) {
            (Some(s), Some(k)) => cache.get(s, k),
            _ => None,
        };
        let n_hit = match known {
            Some(n) => n,
            None => {
                let mut n: i64 = 0;
                let rc = query(fts, i as c_int, (&mut n as *mut i64).cast(), Some(count_cb));
                if rc != ffi::SQLITE_OK {
                    return Err(rc);
                }
                if let (Some(s), Some(k)) = (sig, key) {
                    cache.put(s, k, n);
                }
                n
            }
        };
        // As fts5_aux.c: IDF = log((N - n + 0.5) / (n + 0.5)), at least 1e-6.
        let mut idf = (((n_row - n_hit) as f64 + 0.5) / (n_hit as f64 + 0.5)).ln();
        if idf <= 0.0 {
            idf = 1e-6;
        }
        d.idf[i] = idf;
    }
    let raw = Box::into_raw(d);
    let rc = set(fts, raw.cast(), Some(drop_data));
    if rc != ffi::SQLITE_OK {
        // xSetAuxdata calls the destructor itself when it fails.
        return Err(rc);
    }
    Ok(&mut *raw)
}

/// `nmem_bm25(table, weight of column 0, weight of column 1, signature)`: `bm25()`'s score.
unsafe extern "C" fn nmem_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    vals: *mut *mut ffi::sqlite3_value,
) {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let api = &*api;
    let vals: &[*mut ffi::sqlite3_value] = if n_val > 0 && !vals.is_null() {
        std::slice::from_raw_parts(vals, n_val as usize)
    } else {
        &[]
    };
    // The signature: the argument after the two column weights.
    let sig = vals.get(2).and_then(|&v| {
        if ffi::sqlite3_value_type(v) != ffi::SQLITE_BLOB {
            return None;
        }
        let n = ffi::sqlite3_value_bytes(v);
        let p = ffi::sqlite3_value_blob(v);
        (!p.is_null() && n > 0).then(|| std::slice::from_raw_parts(p.cast::<u8>(), n as usize))
    });
    let d = match data(api, fts, sig) {
        Ok(d) => d,
        Err(rc) => return ffi::sqlite3_result_error_code(ctx, rc),
    };
    let (Some(inst_count), Some(inst), Some(column_size)) =
        (api.xInstCount, api.xInst, api.xColumnSize)
    else {
        return ffi::sqlite3_result_error_code(ctx, ffi::SQLITE_ERROR);
    };
    d.freq.iter_mut().for_each(|f| *f = 0.0);
    let mut n_inst: c_int = 0;
    let rc = inst_count(fts, &mut n_inst);
    if rc != ffi::SQLITE_OK {
        return ffi::sqlite3_result_error_code(ctx, rc);
    }
    for i in 0..n_inst {
        let (mut ip, mut ic, mut io): (c_int, c_int, c_int) = (0, 0, 0);
        let rc = inst(fts, i, &mut ip, &mut ic, &mut io);
        if rc != ffi::SQLITE_OK {
            return ffi::sqlite3_result_error_code(ctx, rc);
        }
        // Only the column weights count as weights (the signature is never column 2: the
        // tables have two columns).
        let w = if n_val > ic && ic < 2 {
            ffi::sqlite3_value_double(vals[ic as usize])
        } else {
            1.0
        };
        if let Some(f) = d.freq.get_mut(ip as usize) {
            *f += w;
        }
    }
    let mut n_tok: c_int = 0;
    let rc = column_size(fts, -1, &mut n_tok);
    if rc != ffi::SQLITE_OK {
        return ffi::sqlite3_result_error_code(ctx, rc);
    }
    let dl = n_tok as f64;
    let mut score = 0.0;
    for (idf, f) in d.idf.iter().zip(&d.freq) {
        score += idf * ((f * (K1 + 1.0)) / (f + K1 * (1.0 - B + B * dl / d.avgdl)));
    }
    // bm25() returns `-1.0 * score`: the same bits as the negation.
    ffi::sqlite3_result_double(ctx, -score);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn db() -> (Connection, Arc<DocFreq>) {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE VIRTUAL TABLE t_fts USING fts5(content, terms, content='',
                 contentless_delete=1, tokenize='porter unicode61');",
        )
        .unwrap();
        let cache = Arc::new(DocFreq::default());
        register(&c, cache.clone()).unwrap();
        (c, cache)
    }

    const WORDS: &[&str] = &[
        "cargo", "test", "tests", "retry", "backoff", "invoice", "parse", "token", "refresh",
    ];

    fn fill(c: &Connection, rows: &[(String, String)]) {
        for (i, (a, b)) in rows.iter().enumerate() {
            c.execute(
                "INSERT INTO t_fts (rowid, content, terms) VALUES (?1, ?2, ?3)",
                rusqlite::params![i as i64 + 1, a, b],
            )
            .unwrap();
        }
    }

    /// (rowid, score) of `f` over `query`, newest first.
    fn scores(c: &Connection, f: &str, query: &str, sig: Option<&[u8]>) -> Vec<(i64, f64)> {
        let sql = if f == "bm25" {
            "SELECT rowid, bm25(t_fts, 1.0, 0.35) FROM t_fts WHERE t_fts MATCH ?1 ORDER BY rowid DESC"
                .to_string()
        } else {
            "SELECT rowid, nmem_bm25(t_fts, 1.0, 0.35, ?2) FROM t_fts WHERE t_fts MATCH ?1 ORDER BY rowid DESC"
                .to_string()
        };
        let mut stmt = c.prepare(&sql).unwrap();
        let mut out = Vec::new();
        let mut rows = if f == "bm25" {
            stmt.query(rusqlite::params![query]).unwrap()
        } else {
            stmt.query(rusqlite::params![query, sig]).unwrap()
        };
        while let Some(r) = rows.next().unwrap() {
            out.push((r.get(0).unwrap(), r.get(1).unwrap()));
        }
        out
    }

    fn row() -> impl Strategy<Value = (String, String)> {
        let text =
            prop::collection::vec(prop::sample::select(WORDS), 1..12).prop_map(|w| w.join(" "));
        (text.clone(), text)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// The same scores as SQLite's bm25(), bit for bit, with and without a signature,
        /// counted or remembered, for every query shape search builds.
        #[test]
        fn scores_are_bm25s(rows in prop::collection::vec(row(), 1..40)) {
            let (c, _) = db();
            fill(&c, &rows);
            let sig = signature(&c, "t_fts").unwrap();
            for q in [
                "\"test\"",
                "\"cargo\" \"test\"",
                "(\"cargo\" AND \"test\") OR (\"cargo\" AND \"retry\") OR (\"test\" AND \"retry\")",
                "\"retry\" OR \"backoff\" OR \"tests\"",
                "(\"parseInvoice\" OR \"parse invoice\") AND \"token\"",
            ] {
                let want = scores(&c, "bm25", q, None);
                for _ in 0..2 {
                    let got = scores(&c, "nmem_bm25", q, Some(&sig));
                    prop_assert_eq!(want.len(), got.len());
                    for (a, b) in want.iter().zip(&got) {
                        prop_assert_eq!(a.0, b.0);
                        prop_assert_eq!(a.1.to_bits(), b.1.to_bits(), "{} row {}", q, a.0);
                    }
                }
                prop_assert_eq!(&want, &scores(&c, "nmem_bm25", q, None));
            }
        }
    }

    #[test]
    fn a_count_is_remembered_only_for_the_index_it_was_counted_on() {
        let (c, cache) = db();
        let rows: Vec<(String, String)> = (0..30)
            .map(|i| (format!("cargo test run {i}"), String::new()))
            .collect();
        fill(&c, &rows);
        let sig = signature(&c, "t_fts").unwrap();
        let first = scores(&c, "nmem_bm25", "\"cargo\" \"test\"", Some(&sig));
        assert_eq!(cache.walked(), 2, "both phrases counted");
        let again = scores(&c, "nmem_bm25", "\"test\" OR \"cargo\"", Some(&sig));
        assert_eq!(cache.walked(), 2, "remembered, in another query shape too");
        assert_eq!(first.len(), again.len());
        // Without a signature nothing is remembered or reused.
        scores(&c, "nmem_bm25", "\"cargo\"", None);
        assert_eq!(cache.walked(), 2);
        // A new row changes the signature, and the counts are walked again: the scores are the
        // new index's, as bm25() gives them.
        c.execute(
            "INSERT INTO t_fts (rowid, content, terms) VALUES (100, 'cargo build', '')",
            [],
        )
        .unwrap();
        let sig2 = signature(&c, "t_fts").unwrap();
        assert_ne!(sig, sig2);
        let after = scores(&c, "nmem_bm25", "\"cargo\"", Some(&sig2));
        assert_eq!(cache.walked(), 3);
        assert_eq!(after, scores(&c, "bm25", "\"cargo\"", None));
        // A deletion too.
        c.execute("DELETE FROM t_fts WHERE rowid = 3", []).unwrap();
        let sig3 = signature(&c, "t_fts").unwrap();
        assert_ne!(sig2, sig3);
        let after = scores(&c, "nmem_bm25", "\"cargo\"", Some(&sig3));
        assert_eq!(after, scores(&c, "bm25", "\"cargo\"", None));
        assert_eq!(cache.walked(), 4);
    }

    #[test]
    fn writes_to_one_table_do_not_evict_another_tables_counts() {
        let (c, cache) = db();
        c.execute_batch(
            "CREATE VIRTUAL TABLE u_fts USING fts5(content, terms, content='',
                 contentless_delete=1, tokenize='porter unicode61');",
        )
        .unwrap();
        for i in 1..=20 {
            c.execute(
                "INSERT INTO u_fts (rowid, content, terms) VALUES (?1, 'cargo test prompt', '')",
                [i],
            )
            .unwrap();
        }
        fill(&c, &[("cargo test".into(), String::new())]);
        let scores_u = |sig: &[u8]| {
            let mut st = c
                .prepare(
                    "SELECT rowid, nmem_bm25(u_fts, 1.0, 0.5, ?1) FROM u_fts \
                     WHERE u_fts MATCH '\"cargo\"' ORDER BY rowid",
                )
                .unwrap();
            st.query_map([sig], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?)))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        };
        let sig_u = signature(&c, "u_fts").unwrap();
        let before = scores_u(&sig_u);
        assert_eq!(cache.walked(), 1);
        // Many writes to t_fts, each searched: more states of t_fts than the cache keeps.
        for i in 0..(STATES as i64 * 3) {
            c.execute(
                "INSERT INTO t_fts (rowid, content, terms) VALUES (?1, 'cargo build', '')",
                [100 + i],
            )
            .unwrap();
            let sig = signature(&c, "t_fts").unwrap();
            scores(&c, "nmem_bm25", "\"cargo\"", Some(&sig));
        }
        let walked = cache.walked();
        // u_fts did not change: its count is still remembered, and the scores are the same.
        assert_eq!(signature(&c, "u_fts").unwrap(), sig_u);
        assert_eq!(scores_u(&sig_u), before);
        assert_eq!(
            cache.walked(),
            walked,
            "u_fts's count was evicted by t_fts's writes"
        );
    }
}
