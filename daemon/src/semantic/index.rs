//! The in-memory side of vector search: per project, the binary codes (sign bits) of its
//! vectors, loaded from `nmem.db` on first use and kept under an LRU bound on bytes. A search
//! scans the codes by Hamming distance for candidates, then [`rescore`] reads their int8 vectors
//! and ranks them by cosine.
//!
//! A project (or every project together) whose codes alone exceed the bound keeps the codes of
//! its newest rows only, in half the bound ([`Bounded`]: the reply says how many of how many were
//! compared); its older rows are found by their words. Before, such a scope was scanned exactly
//! from the database on every search: 923 ms for 948k vectors, and every one of them read from
//! disk. [`scan`], that exact scan, remains for a bound too small to hold any code
//! (`[embed] cache_mb = 0`).

use super::{Active, Key};
use rusqlite::Connection;
use std::collections::HashMap;

/// One project's codes (`None`: every project's).
struct Codes {
    keys: Vec<Key>,
    /// `words` u64 per key.
    codes: Vec<u64>,
    last_used: u64,
    /// Only the newest rows are here: how many rows the scope holds in all.
    partial: Option<u64>,
}

/// A search that compared the query with the newest `searched` of the scope's `total` rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounded {
    pub searched: u64,
    pub total: u64,
}

impl Codes {
    /// What the entry holds in memory: its vectors' capacities, not their lengths (a vector
    /// grown by doubling holds up to twice its length: 20 MB for 13.7 MB of codes at 1M rows).
    fn bytes(&self) -> usize {
        self.keys.capacity() * std::mem::size_of::<Key>() + self.codes.capacity() * 8
    }

    /// Loaded: give back what doubling reserved beyond the rows.
    fn shrink(mut self) -> Codes {
        self.keys.shrink_to_fit();
        self.codes.shrink_to_fit();
        self
    }

    /// Room for one more row of `words` words, grown by an eighth rather than doubled: rows
    /// embedded after a load arrive one batch at a time, and doubling a loaded entry would
    /// hold twice its codes for one new row.
    fn reserve_one(&mut self, words: usize) {
        if self.keys.len() == self.keys.capacity() {
            self.keys.reserve_exact(self.keys.len() / 8 + 64);
        }
        if self.codes.len() + words > self.codes.capacity() {
            self.codes.reserve_exact(self.codes.len() / 8 + 64 * words);
        }
    }
}

pub struct Cache {
    cap: usize,
    model: i64,
    entries: HashMap<Option<String>, Codes>,
    /// Projects whose codes were found to exceed the bound: not loaded again.
    too_big: std::collections::HashSet<Option<String>>,
    clock: u64,
}

/// The sign bits of an int8 vector (as `binary_code` makes them of floats: bit set when > 0).
fn code_of(vec: &[i8], out: &mut Vec<u64>) {
    let start = out.len();
    out.resize(start + vec.len().div_ceil(64), 0);
    for (i, &x) in vec.iter().enumerate() {
        if x > 0 {
            out[start + i / 64] |= 1 << (i % 64);
        }
    }
}

fn as_i8(blob: &[u8]) -> &[i8] {
    // SAFETY: i8 and u8 have the same size and alignment.
    unsafe { std::slice::from_raw_parts(blob.as_ptr().cast::<i8>(), blob.len()) }
}

impl Cache {
    pub fn new(cap: usize) -> Cache {
        Cache {
            cap,
            model: 0,
            entries: HashMap::new(),
            too_big: Default::default(),
            clock: 0,
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.too_big.clear();
    }

    /// The best `m` candidates of a project by Hamming distance to the query's code (among
    /// its newest rows when its codes exceed the bound: then also how many were compared);
    /// `None` when not even a part fits in the bound (then [`scan`] it).
    #[allow(clippy::type_complexity)]
    pub fn candidates(
        &mut self,
        c: &Connection,
        active: &Active,
        project: Option<&str>,
        q: &[f32],
        m: usize,
        prompts: bool,
    ) -> rusqlite::Result<Option<(Vec<Key>, Option<Bounded>)>> {
        if self.model != active.db_id {
            self.clear();
            self.model = active.db_id;
        }
        self.clock += 1;
        let words = active.dim.div_ceil(64);
        let qcode = nmem_embed::quant::binary_code(q);
        let entry_key = project.map(str::to_string);
        if self.too_big.contains(&entry_key) {
            return Ok(None);
        }
        if !self.entries.contains_key(&entry_key) {
            // The scope's rows, counted on a compact index (the vector tables have none: counting
            // them would read every vector), tell whether its codes can fit at all.
            let rows = scope_rows(c, project)?;
            let per_row = std::mem::size_of::<Key>() + words * 8;
            let whole = if (rows[0] + rows[1]) as usize * per_row <= self.cap {
                load(c, active, project, self.cap, (rows[0] + rows[1]) as usize)?
            } else {
                None
            };
            let codes = match whole {
                Some(codes) => codes,
                None => match load_newest(c, active, project, self.cap / 2, rows)? {
                    Some(codes) => codes,
                    None => {
                        self.too_big.insert(entry_key);
                        return Ok(None);
                    }
                },
            };
            self.entries.insert(entry_key.clone(), codes.shrink());
            self.evict(Some(&entry_key));
        }
        let clock = self.clock;
        let codes = self.entries.get_mut(&entry_key).expect("just inserted");
        codes.last_used = clock;
        let bounded = codes.partial.map(|total| Bounded {
            searched: codes.keys.len() as u64,
            total,
        });
        Ok(Some((best(codes, &qcode, words, m, prompts), bounded)))
    }

    /// A row embedded after its project's codes were loaded. The bound holds here too: when
    /// new rows take the cache over it, the least recently used entries go, this one included
    /// (its next search loads it again, within the bound).
    pub fn add(&mut self, active: &Active, key: Key, project: &str, vec: &[i8]) {
        if self.model != active.db_id {
            return;
        }
        let words = vec.len().div_ceil(64);
        let mut grew = false;
        for name in [Some(project.to_string()), None] {
            if let Some(codes) = self.entries.get_mut(&name) {
                codes.reserve_one(words);
                grew = true;
                codes.keys.push(key);
                code_of(vec, &mut codes.codes);
                if let Some(total) = &mut codes.partial {
                    *total += 1;
                }
            }
        }
        if grew {
            self.evict(None);
        }
    }

    /// What the cached codes hold in memory, in bytes (at most the bound).
    pub fn held(&self) -> usize {
        self.entries.values().map(Codes::bytes).sum()
    }

    /// Drop the least recently used entries (never `keep`, the one just loaded, which fits by
    /// construction) until the total is within the bound.
    fn evict(&mut self, keep: Option<&Option<String>>) {
        while self.held() > self.cap {
            let oldest = self
                .entries
                .iter()
                .filter(|(k, _)| Some(*k) != keep)
                .min_by_key(|(_, v)| v.last_used)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => {
                    self.entries.remove(&k);
                }
                None => break,
            }
        }
    }
}

/// The SQL reading a project's (every project's: `?1` NULL) vectors of the active model, for
/// observations and for prompts.
fn vector_queries(project: Option<&str>) -> [(&'static str, bool); 2] {
    match project {
        Some(_) => [
            ("SELECT v.id, v.vec, v.scale FROM observations o JOIN obs_vectors v ON v.id = o.id WHERE o.project = ?1 AND v.model = ?2", false),
            ("SELECT v.id, v.vec, v.scale FROM prompts p JOIN prompt_vectors v ON v.id = p.id WHERE p.project = ?1 AND v.model = ?2", true),
        ],
        None => [
            ("SELECT id, vec, scale FROM obs_vectors WHERE ?1 IS NULL AND model = ?2", false),
            ("SELECT id, vec, scale FROM prompt_vectors WHERE ?1 IS NULL AND model = ?2", true),
        ],
    }
}

/// Every vector of a project with the active model, as codes; `None` as soon as they exceed
/// `cap` bytes.
fn load(
    c: &Connection,
    active: &Active,
    project: Option<&str>,
    cap: usize,
    rows: usize,
) -> rusqlite::Result<Option<Codes>> {
    let words = active.dim.div_ceil(64);
    let per_row = std::mem::size_of::<Key>() + words * 8;
    // Reserved at the size counted, so loading never holds a doubled vector.
    let rows = rows.min(cap / per_row);
    let mut codes = Codes {
        keys: Vec::with_capacity(rows),
        codes: Vec::with_capacity(rows * words),
        last_used: 0,
        partial: None,
    };
    for (sql, prompt) in vector_queries(project) {
        let mut stmt = c.prepare(sql)?;
        let mut rows = stmt.query(rusqlite::params![project, active.db_id])?;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let blob = r.get_ref(1)?.as_blob()?;
            if blob.len() != active.dim {
                continue;
            }
            if (codes.keys.len() + 1) * per_row > cap {
                return Ok(None);
            }
            codes.keys.push(Key { prompt, id });
            code_of(as_i8(blob), &mut codes.codes);
        }
    }
    Ok(Some(codes))
}

/// How many observations and prompts the scope holds (every project: `None`).
fn scope_rows(c: &Connection, project: Option<&str>) -> rusqlite::Result<[u64; 2]> {
    let mut out = [0u64; 2];
    for (i, table) in ["observations", "prompts"].into_iter().enumerate() {
        let sql = match project {
            Some(_) => format!("SELECT COUNT(*) FROM {table} WHERE project = ?1"),
            None => format!("SELECT COUNT(*) FROM {table} WHERE ?1 IS NULL"),
        };
        out[i] = c.query_row(&sql, [project], |r| r.get::<_, i64>(0))? as u64;
    }
    Ok(out)
}

/// The codes of a scope's newest rows within `cap` bytes, observations and prompts in
/// proportion to their rows (`counts`); `None` when not one row fits.
fn load_newest(
    c: &Connection,
    active: &Active,
    project: Option<&str>,
    cap: usize,
    counts: [u64; 2],
) -> rusqlite::Result<Option<Codes>> {
    let per_row = std::mem::size_of::<Key>() + active.dim.div_ceil(64) * 8;
    let rows = (cap / per_row) as u64;
    if rows == 0 {
        return Ok(None);
    }
    let total = counts[0] + counts[1];
    let obs_rows = (rows * counts[0] / total.max(1)).min(counts[0]);
    let limits = [obs_rows, rows.saturating_sub(obs_rows).min(counts[1])];
    let n = (limits[0] + limits[1]) as usize;
    let mut codes = Codes {
        keys: Vec::with_capacity(n),
        codes: Vec::with_capacity(n * active.dim.div_ceil(64)),
        last_used: 0,
        partial: Some(total),
    };
    for ((sql, prompt), limit) in vector_queries(project).into_iter().zip(limits) {
        let id = if project.is_some() { "v.id" } else { "id" };
        let mut stmt = c.prepare(&format!("{sql} ORDER BY {id} DESC LIMIT ?3"))?;
        let mut rows = stmt.query(rusqlite::params![project, active.db_id, limit as i64])?;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let blob = r.get_ref(1)?.as_blob()?;
            if blob.len() != active.dim {
                continue;
            }
            codes.keys.push(Key { prompt, id });
            code_of(as_i8(blob), &mut codes.codes);
        }
    }
    Ok(Some(codes))
}

/// The `n` rows nearest to `q` by the exact cosine of their int8 vectors, reading every vector
/// of the project once and keeping only the best `n`: for projects too big for the code cache.
pub fn scan(
    c: &Connection,
    active: &Active,
    project: Option<&str>,
    q: &[f32],
    n: usize,
    prompts: bool,
) -> rusqlite::Result<Vec<(Key, f32)>> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    // A min-heap of the best so far, by (similarity bits, id) so ties are deterministic.
    struct Sim(f32);
    impl PartialEq for Sim {
        fn eq(&self, o: &Self) -> bool {
            self.cmp(o).is_eq()
        }
    }
    impl Eq for Sim {}
    impl PartialOrd for Sim {
        fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for Sim {
        fn cmp(&self, o: &Self) -> std::cmp::Ordering {
            self.0.total_cmp(&o.0)
        }
    }
    let mut heap: BinaryHeap<Reverse<(Sim, i64, bool)>> = BinaryHeap::with_capacity(n + 1);
    for (sql, prompt) in vector_queries(project) {
        if prompt && !prompts {
            continue;
        }
        let mut stmt = c.prepare(sql)?;
        let mut rows = stmt.query(rusqlite::params![project, active.db_id])?;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let blob = r.get_ref(1)?.as_blob()?;
            if blob.len() != q.len() {
                continue;
            }
            let scale: f64 = r.get(2)?;
            let dot: f32 = as_i8(blob).iter().zip(q).map(|(&x, &y)| x as f32 * y).sum();
            heap.push(Reverse((Sim(dot * scale as f32), id, prompt)));
            if heap.len() > n {
                heap.pop();
            }
        }
    }
    let mut out: Vec<(Key, f32)> = heap
        .into_iter()
        .map(|Reverse((s, id, prompt))| (Key { prompt, id }, s.0))
        .collect();
    out.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(b.0.id.cmp(&a.0.id))
            .then(a.0.prompt.cmp(&b.0.prompt))
    });
    Ok(out)
}

/// The `m` keys nearest to `qcode` by Hamming distance.
fn best(codes: &Codes, qcode: &[u64], words: usize, m: usize, prompts: bool) -> Vec<Key> {
    let mut scored: Vec<(u32, usize)> = codes
        .keys
        .iter()
        .enumerate()
        .filter(|(_, k)| prompts || !k.prompt)
        .map(|(i, _)| {
            let code = &codes.codes[i * words..(i + 1) * words];
            (nmem_embed::quant::hamming(code, qcode), i)
        })
        .collect();
    if scored.len() > m {
        scored.select_nth_unstable(m);
        scored.truncate(m);
    }
    scored.into_iter().map(|(_, i)| codes.keys[i]).collect()
}

/// Rank candidates by the cosine of their int8 vectors with the query; the best `n`.
pub fn rescore(
    c: &Connection,
    active: &Active,
    q: &[f32],
    candidates: Vec<Key>,
    n: usize,
) -> rusqlite::Result<Vec<(Key, f32)>> {
    let mut out = Vec::with_capacity(candidates.len());
    for prompt in [false, true] {
        let ids: Vec<i64> = candidates
            .iter()
            .filter(|k| k.prompt == prompt)
            .map(|k| k.id)
            .collect();
        let table = if prompt {
            "prompt_vectors"
        } else {
            "obs_vectors"
        };
        for chunk in ids.chunks(500) {
            let sql = format!(
                "SELECT id, scale, vec FROM {table} WHERE model = ? AND id IN ({})",
                vec!["?"; chunk.len()].join(", ")
            );
            let mut stmt = c.prepare(&sql)?;
            let args = std::iter::once(active.db_id).chain(chunk.iter().copied());
            let mut rows = stmt.query(rusqlite::params_from_iter(args))?;
            while let Some(r) = rows.next()? {
                let id: i64 = r.get(0)?;
                let scale: f64 = r.get(1)?;
                let blob = r.get_ref(2)?.as_blob()?;
                if blob.len() != q.len() {
                    continue;
                }
                let dot: f32 = as_i8(blob).iter().zip(q).map(|(&x, &y)| x as f32 * y).sum();
                out.push((Key { prompt, id }, dot * scale as f32));
            }
        }
    }
    out.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(b.0.id.cmp(&a.0.id))
            .then(a.0.prompt.cmp(&b.0.prompt))
    });
    out.truncate(n);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random unit vectors.
    fn vector(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
            })
            .collect();
        let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.into_iter().map(|a| a / norm).collect()
    }

    fn db(rows: u64, dim: usize) -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE observations (id INTEGER PRIMARY KEY, project TEXT);
             CREATE TABLE prompts (id INTEGER PRIMARY KEY, project TEXT);
             CREATE TABLE obs_vectors (id INTEGER PRIMARY KEY, model INT, scale REAL, vec BLOB);
             CREATE TABLE prompt_vectors (id INTEGER PRIMARY KEY, model INT, scale REAL, vec BLOB);",
        )
        .unwrap();
        for id in 1..=rows as i64 {
            let (scale, v) = nmem_embed::quant::quantize_i8(&vector(id as u64, dim));
            let blob: Vec<u8> = v.iter().map(|&b| b as u8).collect();
            let project = if id % 3 == 0 { "shop" } else { "other" };
            for (rows, vectors) in [
                ("observations", "obs_vectors"),
                ("prompts", "prompt_vectors"),
            ] {
                c.execute(
                    &format!("INSERT INTO {rows} (id, project) VALUES (?1, ?2)"),
                    rusqlite::params![id, project],
                )
                .unwrap();
                c.execute(
                    &format!(
                        "INSERT INTO {vectors} (id, model, scale, vec) VALUES (?1, 1, ?2, ?3)"
                    ),
                    rusqlite::params![id, scale as f64, blob],
                )
                .unwrap();
            }
        }
        c
    }

    fn active(dim: usize) -> Active {
        Active {
            db_id: 1,
            name: "test".into(),
            dim,
            dir: Default::default(),
        }
    }

    /// The exact scan (projects too big for the cache) and the exhaustive rescoring agree, and
    /// honour the project and prompt filters.
    #[test]
    fn a_project_too_big_for_the_cache_is_scanned_exactly() {
        let dim = 64;
        let c = db(300, dim);
        let a = active(dim);
        let q = vector(10_000, dim);
        for (project, prompts) in [(Some("shop"), true), (None, false), (None, true)] {
            let mut small = Cache::new(0);
            assert!(small
                .candidates(&c, &a, project, &q, 1_000, prompts)
                .unwrap()
                .is_none());
            let scanned = scan(&c, &a, project, &q, 10, prompts).unwrap();
            let mut big = Cache::new(1 << 20);
            let all = big
                .candidates(&c, &a, project, &q, 1_000, prompts)
                .unwrap()
                .expect("fits");
            assert_eq!(all.1, None, "every row compared");
            let rescored = rescore(&c, &a, &q, all.0, 10).unwrap();
            assert_eq!(scanned.len(), 10);
            assert_eq!(
                scanned.iter().map(|x| x.0).collect::<Vec<_>>(),
                rescored.iter().map(|x| x.0).collect::<Vec<_>>()
            );
            for (k, _) in &scanned {
                assert!(prompts || !k.prompt);
                if project.is_some() {
                    assert_eq!(k.id % 3, 0, "only the project's rows");
                }
            }
        }
    }

    /// What the cache's entries hold in memory, measured apart from `Codes::bytes`: the
    /// capacities of their vectors.
    fn allocated(cache: &Cache) -> usize {
        cache
            .entries
            .values()
            .map(|c| c.keys.capacity() * std::mem::size_of::<Key>() + c.codes.capacity() * 8)
            .sum()
    }

    /// The bound is on memory held, not on rows: loads reserve no more than their rows, and
    /// rows embedded later never take the cache over it (before, a loaded entry's vectors held
    /// up to twice their rows, and every row added after a load grew the cache without bound).
    #[test]
    fn the_code_cache_holds_no_more_memory_than_its_bound() {
        let dim = 64;
        let c = db(600, dim);
        let a = active(dim);
        let q = vector(10_000, dim);
        let per_row = std::mem::size_of::<Key>() + 8;
        // Room for every project's 1,200 rows whole, but not for them and the whole database.
        let cap = per_row * 1_300;
        let mut cache = Cache::new(cap);
        for project in [Some("shop"), Some("other"), None, Some("shop")] {
            cache
                .candidates(&c, &a, project, &q, 100, true)
                .unwrap()
                .expect("fits");
            assert!(allocated(&cache) <= cap, "{} > {cap}", allocated(&cache));
            assert_eq!(allocated(&cache), cache.held());
        }
        let v = nmem_embed::quant::quantize_i8(&vector(7, dim)).1;
        for id in 601..5_000 {
            for project in ["shop", "other"] {
                cache.add(&a, Key { prompt: false, id }, project, &v);
                assert!(allocated(&cache) <= cap, "{} > {cap}", allocated(&cache));
            }
            if id % 500 == 0 {
                // Searching again reloads what was dropped, still within the bound.
                cache
                    .candidates(&c, &a, Some("other"), &q, 100, true)
                    .unwrap()
                    .expect("fits");
                assert!(allocated(&cache) <= cap);
            }
        }
    }

    /// Codes that do not fit in the bound: those of the newest rows, in half the bound, and the
    /// search says how many of how many it compared.
    #[test]
    fn a_scope_too_big_for_the_cache_is_searched_among_its_newest_rows() {
        let dim = 64;
        let c = db(300, dim);
        let a = active(dim);
        let q = vector(10_000, dim);
        // 600 rows (300 observations, 300 prompts) of 24 bytes; room for 200 of them.
        let per_row = std::mem::size_of::<Key>() + 8;
        let mut cache = Cache::new(per_row * 200);
        let (keys, bounded) = cache
            .candidates(&c, &a, None, &q, 1_000, true)
            .unwrap()
            .expect("the newest rows fit");
        assert_eq!(
            bounded,
            Some(Bounded {
                searched: 100,
                total: 600
            })
        );
        assert_eq!(keys.len(), 100);
        assert_eq!(keys.iter().filter(|k| k.prompt).count(), 50);
        assert!(keys.iter().all(|k| k.id > 250), "only the newest rows");
        // A row embedded afterwards joins them.
        let v = nmem_embed::quant::quantize_i8(&vector(7, dim)).1;
        cache.add(
            &a,
            Key {
                prompt: false,
                id: 301,
            },
            "shop",
            &v,
        );
        let (keys, bounded) = cache
            .candidates(&c, &a, None, &q, 1_000, true)
            .unwrap()
            .unwrap();
        assert!(keys.contains(&Key {
            prompt: false,
            id: 301
        }));
        assert_eq!(bounded.map(|b| (b.searched, b.total)), Some((101, 601)));
        // A project that fits is searched whole, in the same cache.
        let (keys, bounded) = cache
            .candidates(&c, &a, Some("shop"), &q, 1_000, false)
            .unwrap()
            .unwrap();
        assert_eq!(bounded, None);
        assert_eq!(keys.len(), 100, "every observation of the project");
    }
}
