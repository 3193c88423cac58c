//! Compiled objects cached by content hash: a process-wide in-memory cache,
//! optionally backed by object files on disk (`<dir>/<hash>.o`).
//!
//! The key covers everything the machine code depends on: the program as
//! written and as loaded (resolved map handles and value addresses are baked
//! into the code as constants), the map bindings, the target CPU and
//! features, the options, and the LLVM and crate versions. Disk caching is
//! best effort: an unreadable or unwritable cache just means compiling.

use crate::options::CacheMode;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

const MAGIC: &[u8; 8] = b"BPFJETO1";
/// The in-memory cache is cleared when it grows past this many objects.
const MEMORY_LIMIT: usize = 1024;

/// A 128-bit FNV-1a hash, written incrementally.
#[derive(Clone)]
pub(crate) struct KeyHasher(u128);

impl KeyHasher {
    pub(crate) fn new() -> Self {
        KeyHasher(0x6c62272e07bb014262b821756295c58d)
    }

    pub(crate) fn bytes(&mut self, bytes: &[u8]) -> &mut Self {
        // Length-prefixed so that concatenations cannot collide.
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            self.0 ^= u128::from(*b);
            self.0 = self.0.wrapping_mul(0x0000000001000000000000000000013B);
        }
        self
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }

    pub(crate) fn finish(&self) -> u128 {
        self.0
    }
}

/// A compiled object and what compiling it measured.
#[derive(Clone, Debug)]
pub(crate) struct Cached {
    pub object: Arc<Vec<u8>>,
    pub ir_before: u64,
    pub ir_after: u64,
}

fn memory() -> &'static Mutex<HashMap<u128, Cached>> {
    static MEMORY: OnceLock<Mutex<HashMap<u128, Cached>>> = OnceLock::new();
    MEMORY.get_or_init(|| Mutex::new(HashMap::new()))
}

fn file_name(dir: &Path, key: u128) -> std::path::PathBuf {
    dir.join(format!("{key:032x}.o"))
}

pub(crate) fn lookup(mode: &CacheMode, key: u128) -> Option<Cached> {
    if *mode == CacheMode::Off {
        return None;
    }
    if let Some(hit) = memory().lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Some(hit);
    }
    let CacheMode::Disk(dir) = mode else {
        return None;
    };
    let data = std::fs::read(file_name(dir, key)).ok()?;
    let cached = decode(&data)?;
    remember(key, &cached);
    Some(cached)
}

pub(crate) fn store(mode: &CacheMode, key: u128, cached: &Cached) {
    if *mode == CacheMode::Off {
        return;
    }
    remember(key, cached);
    if let CacheMode::Disk(dir) = mode {
        let _ = write_file(dir, key, cached);
    }
}

fn remember(key: u128, cached: &Cached) {
    if let Ok(mut m) = memory().lock() {
        if m.len() >= MEMORY_LIMIT {
            m.clear();
        }
        m.insert(key, cached.clone());
    }
}

fn decode(data: &[u8]) -> Option<Cached> {
    let rest = data.strip_prefix(MAGIC.as_slice())?;
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            rest.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    Some(Cached {
        ir_before: word(0)?,
        ir_after: word(1)?,
        object: Arc::new(rest.get(16..)?.to_vec()),
    })
}

fn write_file(dir: &Path, key: u128, cached: &Cached) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut data = Vec::with_capacity(24 + cached.object.len());
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&cached.ir_before.to_le_bytes());
    data.extend_from_slice(&cached.ir_after.to_le_bytes());
    data.extend_from_slice(&cached.object);
    // Write under a unique name, then rename: readers never see a partial file.
    let tmp = dir.join(format!(
        ".{key:032x}.{}.{:?}.tmp",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::write(&tmp, &data)?;
    std::fs::rename(&tmp, file_name(dir, key)).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("bpfjet-cache-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn keys_separate_their_parts() {
        let a = KeyHasher::new().bytes(b"ab").bytes(b"c").finish();
        let b = KeyHasher::new().bytes(b"a").bytes(b"bc").finish();
        assert_ne!(a, b);
        assert_eq!(a, KeyHasher::new().bytes(b"ab").bytes(b"c").finish());
    }

    #[test]
    fn objects_survive_a_round_trip_through_disk() {
        let dir = scratch_dir("roundtrip");
        let mode = CacheMode::Disk(dir.clone());
        let key = KeyHasher::new().bytes(b"roundtrip test").finish();
        let cached = Cached {
            object: Arc::new(vec![1, 2, 3, 4]),
            ir_before: 10,
            ir_after: 5,
        };
        store(&mode, key, &cached);
        assert!(file_name(&dir, key).exists());
        // Forget the in-memory copy: the next lookup reads the file.
        memory().lock().unwrap().remove(&key);
        let hit = lookup(&mode, key).expect("cache hit from disk");
        assert_eq!(*hit.object, vec![1, 2, 3, 4]);
        assert_eq!((hit.ir_before, hit.ir_after), (10, 5));
        // A damaged file is a miss, not an error.
        std::fs::write(file_name(&dir, key), b"garbage").unwrap();
        memory().lock().unwrap().remove(&key);
        assert!(lookup(&mode, key).is_none());
        assert!(lookup(&CacheMode::Off, key).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
