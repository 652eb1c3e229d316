//! The in-memory side of vector search: per project, the binary codes (sign bits) of its
//! vectors, loaded from `nmem.db` on first use and kept under an LRU bound on bytes. A search
//! scans the codes by Hamming distance for candidates, then [`rescore`] reads their int8 vectors
//! and ranks them by cosine. A project whose codes alone exceed the bound is scanned straight
//! from the database instead (slower, never over the memory bound).

use super::{Active, Key};
use rusqlite::Connection;
use std::collections::HashMap;

/// One project's codes (`None`: every project's).
struct Codes {
    keys: Vec<Key>,
    /// `words` u64 per key.
    codes: Vec<u64>,
    last_used: u64,
}

impl Codes {
    fn bytes(&self) -> usize {
        self.keys.len() * std::mem::size_of::<Key>() + self.codes.len() * 8
    }
}

pub struct Cache {
    cap: usize,
    model: i64,
    entries: HashMap<Option<String>, Codes>,
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
            clock: 0,
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// The best `m` candidates of a project by Hamming distance to the query's code.
    pub fn candidates(
        &mut self,
        c: &Connection,
        active: &Active,
        project: Option<&str>,
        q: &[f32],
        m: usize,
        prompts: bool,
    ) -> rusqlite::Result<Vec<Key>> {
        if self.model != active.db_id {
            self.entries.clear();
            self.model = active.db_id;
        }
        self.clock += 1;
        let words = active.dim.div_ceil(64);
        let qcode = nmem_embed::quant::binary_code(q);
        let entry_key = project.map(str::to_string);
        if !self.entries.contains_key(&entry_key) {
            let codes = load(c, active, project)?;
            if codes.bytes() > self.cap {
                // Too big to keep: use it once.
                return Ok(best(&codes, &qcode, words, m, prompts));
            }
            self.entries.insert(entry_key.clone(), codes);
            self.evict(&entry_key);
        }
        let clock = self.clock;
        let codes = self.entries.get_mut(&entry_key).expect("just inserted");
        codes.last_used = clock;
        Ok(best(codes, &qcode, words, m, prompts))
    }

    /// A row embedded after its project's codes were loaded.
    pub fn add(&mut self, active: &Active, key: Key, project: &str, vec: &[i8]) {
        if self.model != active.db_id {
            return;
        }
        for name in [Some(project.to_string()), None] {
            if let Some(codes) = self.entries.get_mut(&name) {
                codes.keys.push(key);
                code_of(vec, &mut codes.codes);
            }
        }
    }

    /// Drop the least recently used entries until the total is within the bound.
    fn evict(&mut self, keep: &Option<String>) {
        while self.entries.values().map(Codes::bytes).sum::<usize>() > self.cap {
            let oldest = self
                .entries
                .iter()
                .filter(|(k, _)| *k != keep)
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

/// Every vector of a project with the active model, as codes.
fn load(c: &Connection, active: &Active, project: Option<&str>) -> rusqlite::Result<Codes> {
    let mut codes = Codes {
        keys: Vec::new(),
        codes: Vec::new(),
        last_used: 0,
    };
    let queries: [(&str, bool); 2] = match project {
        Some(_) => [
            ("SELECT v.id, v.vec FROM observations o JOIN obs_vectors v ON v.id = o.id WHERE o.project = ?1 AND v.model = ?2", false),
            ("SELECT v.id, v.vec FROM prompts p JOIN prompt_vectors v ON v.id = p.id WHERE p.project = ?1 AND v.model = ?2", true),
        ],
        None => [
            ("SELECT id, vec FROM obs_vectors WHERE ?1 IS NULL AND model = ?2", false),
            ("SELECT id, vec FROM prompt_vectors WHERE ?1 IS NULL AND model = ?2", true),
        ],
    };
    for (sql, prompt) in queries {
        let mut stmt = c.prepare(sql)?;
        let mut rows = stmt.query(rusqlite::params![project, active.db_id])?;
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
    Ok(codes)
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
            let mut stmt = c.prepare_cached(&sql)?;
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
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.id.cmp(&a.0.id)));
    out.truncate(n);
    Ok(out)
}
