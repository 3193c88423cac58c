//! The control plane of the tuple-space-search classifier
//! (`examples/nf/tss.c`): rule sets over the test's flows, written into the
//! NF's maps the way the C program reads them, and a reference classifier
//! (a hash map per tuple) that says what each frame's verdict must be.

use bpfjet_maps::state::{to_hex, EntryState, MapState};
use std::collections::HashMap;

// examples/nf/tss.c's geometry.
pub const NBUCKETS: usize = 64;
pub const SLOTS: usize = 8;
const SEED: u32 = 0x9e37_79b9;
const KEY: usize = 16;
const SLOT_BYTES: usize = KEY + 8;

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;

/// A masked 5-tuple in the program's byte layout: source and destination
/// address and ports as they are in the packet, protocol, 3 zero bytes.
pub type Key = [u8; KEY];

/// The key of an IPv4 TCP/UDP frame (ports 0 for other protocols), None
/// for anything the program passes without classifying.
pub fn frame_key(f: &[u8]) -> Option<Key> {
    if f.len() < 34 || f[12..14] != [8, 0] {
        return None;
    }
    let mut k = [0u8; KEY];
    k[0..4].copy_from_slice(&f[26..30]);
    k[4..8].copy_from_slice(&f[30..34]);
    k[12] = f[23];
    if f[14] & 0x0f == 5 && (f[23] == 6 || f[23] == 17) {
        if f.len() < 38 {
            return None;
        }
        k[8..12].copy_from_slice(&f[34..38]);
    }
    Some(k)
}

fn masked(k: &Key, m: &Key) -> Key {
    std::array::from_fn(|i| k[i] & m[i])
}

fn prefix(bits: u32) -> [u8; 4] {
    (u32::MAX.checked_shl(32 - bits).unwrap_or(0)).to_be_bytes()
}

/// Mask number `i` of a fixed enumeration: source prefix /0../32, destination
/// prefix, each port exact or wildcard, protocol exact or wildcard.
fn mask(i: usize) -> Key {
    const SRC: [u32; 5] = [32, 24, 16, 0, 8];
    const DST: [u32; 4] = [32, 0, 24, 16];
    let mut m = [0u8; KEY];
    m[0..4].copy_from_slice(&prefix(SRC[i % 5]));
    m[4..8].copy_from_slice(&prefix(DST[(i / 5) % 4]));
    if (i / 20).is_multiple_of(2) {
        m[8..10].copy_from_slice(&[0xff, 0xff]);
    }
    if (i / 40).is_multiple_of(2) {
        m[10..12].copy_from_slice(&[0xff, 0xff]);
    }
    if (i / 80).is_multiple_of(2) {
        m[12] = 0xff;
    }
    m
}

#[derive(Clone, Copy, Debug)]
pub struct Rule {
    pub id: u32,
    pub prio: u32,
    pub action: u32,
    pub ifindex: u32,
}

/// A rule set as the control plane holds it.
pub struct RuleSet {
    /// Tuples compiled into the program (its `NTUPLES`).
    pub capacity: usize,
    pub masks: Vec<Key>,
    pub tables: Vec<HashMap<Key, Rule>>,
    pub rules: Vec<Rule>,
}

struct Rng(u32);

impl Rng {
    fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

impl RuleSet {
    /// `used` tuples of a program built for `capacity`; per tuple, rules
    /// for `per_tuple` keys of frames drawn from `frames` (so packets hit
    /// them in several tuples at once, priorities deciding) and as many
    /// keys no frame has.
    pub fn for_frames(capacity: usize, used: usize, per_tuple: usize, frames: &[Vec<u8>]) -> Self {
        let keys: Vec<Key> = frames.iter().filter_map(|f| frame_key(f)).collect();
        let mut rng = Rng(0x2545_f491 ^ capacity as u32);
        let mut set = RuleSet {
            capacity,
            masks: (0..used).map(|t| mask(t * 7 % 160)).collect(),
            tables: vec![HashMap::new(); used],
            rules: Vec::new(),
        };
        for t in 0..used {
            for j in 0..2 * per_tuple {
                let key = if j < per_tuple {
                    keys[rng.next() as usize % keys.len()]
                } else {
                    // 172.16/12 addresses: not in the test's traffic.
                    let mut k = [0u8; KEY];
                    k[0..4].copy_from_slice(&[172, 16 + (rng.next() % 16) as u8, 0, 1]);
                    k[4..8].copy_from_slice(&rng.next().to_be_bytes());
                    k[8..12].copy_from_slice(&rng.next().to_be_bytes());
                    k[12] = 17;
                    k
                };
                let key = masked(&key, &set.masks[t]);
                if set.tables[t].contains_key(&key) || !set.room(t, &key) {
                    continue;
                }
                let id = set.rules.len() as u32;
                let action = [XDP_DROP, XDP_PASS, XDP_REDIRECT][rng.next() as usize % 3];
                let rule = Rule {
                    id,
                    prio: 1 + rng.next() % 1000,
                    action,
                    ifindex: 1 + id % 4,
                };
                set.rules.push(rule);
                set.tables[t].insert(key, rule);
            }
        }
        set
    }

    /// The bucket of a masked key in its tuple's table, and its signature.
    pub fn bucket_of(key: &Key) -> (usize, u16) {
        let h = bpfjet_kfuncs::hash::crc32c(key, SEED);
        ((h as usize) % NBUCKETS, ((h >> 16) as u16) | 1)
    }

    fn room(&self, t: usize, key: &Key) -> bool {
        let (b, _) = Self::bucket_of(key);
        self.tables[t]
            .keys()
            .filter(|k| Self::bucket_of(k).0 == b)
            .count()
            < SLOTS
    }

    /// The maps the program reads, filled.
    pub fn state(&self) -> MapState {
        let mut state = MapState::new();
        let mut tuples = vec![0u8; KEY * self.capacity + 4];
        for (t, m) in self.masks.iter().enumerate() {
            tuples[KEY * t..KEY * (t + 1)].copy_from_slice(m);
        }
        let n = KEY * self.capacity;
        tuples[n..n + 4].copy_from_slice(&(self.masks.len() as u32).to_le_bytes());
        state.insert("tuples".into(), vec![entry(0, &tuples)]);

        let mut tables = Vec::new();
        for (t, table) in self.tables.iter().enumerate() {
            let mut buckets = vec![vec![0u8; 2 * SLOTS + SLOTS * SLOT_BYTES]; NBUCKETS];
            let mut rules: Vec<(&Key, &Rule)> = table.iter().collect();
            rules.sort_by_key(|(_, r)| r.id);
            for (key, rule) in rules {
                let (b, sig) = Self::bucket_of(key);
                let bucket = &mut buckets[b];
                let s = (0..SLOTS)
                    .find(|&s| bucket[2 * s..2 * s + 2] == [0, 0])
                    .expect("room checked at insert");
                bucket[2 * s..2 * s + 2].copy_from_slice(&sig.to_le_bytes());
                let at = 2 * SLOTS + s * SLOT_BYTES;
                bucket[at..at + KEY].copy_from_slice(key);
                bucket[at + KEY..at + KEY + 4].copy_from_slice(&rule.id.to_le_bytes());
                bucket[at + KEY + 4..at + SLOT_BYTES].copy_from_slice(&rule.prio.to_le_bytes());
            }
            for (b, bucket) in buckets.iter().enumerate() {
                if bucket.iter().any(|&x| x != 0) {
                    tables.push(entry((t * NBUCKETS + b) as u32, bucket));
                }
            }
        }
        state.insert("tables".into(), tables);
        let rules = self
            .rules
            .iter()
            .map(|r| {
                let mut v = r.action.to_le_bytes().to_vec();
                v.extend_from_slice(&r.ifindex.to_le_bytes());
                entry(r.id, &v)
            })
            .collect();
        state.insert("rules".into(), rules);
        state
    }

    /// What the classifier must answer for `frame` (the rule, if any).
    pub fn classify(&self, frame: &[u8]) -> Option<Rule> {
        let key = frame_key(frame)?;
        let mut best: Option<Rule> = None;
        for (m, table) in self.masks.iter().zip(&self.tables) {
            if let Some(r) = table.get(&masked(&key, m)) {
                if best.is_none_or(|b| r.prio > b.prio) {
                    best = Some(*r);
                }
            }
        }
        best
    }

    /// The verdict the program must return for `frame`.
    pub fn verdict(&self, frame: &[u8]) -> u32 {
        match (frame_key(frame), self.classify(frame)) {
            (Some(_), Some(r)) => r.action,
            _ => XDP_PASS,
        }
    }
}

fn entry(key: u32, value: &[u8]) -> EntryState {
    EntryState {
        key: to_hex(&key.to_le_bytes()),
        value: Some(to_hex(value)),
        ..EntryState::default()
    }
}
