//! One command sequence through both backends — the kernel's `bpf()` and
//! bpfjet's — compared result by result: errnos, values, key walks.

mod common;
use common::{kernel_backend_usable, JetNs};

use bpfjet_sys::{
    decode, encode, Backend, Cmd, Command, Errno, KernelBackend, MapBatch, MapCreate, MapElem,
};
use std::cell::Cell;

const HASH: u32 = 1;
const ARRAY: u32 = 2;
const PERCPU_ARRAY: u32 = 6;
const QUEUE: u32 = 22;
const DEVMAP: u32 = 14;
const DEVMAP_HASH: u32 = 25;

/// What one step observed: the result and the bytes it wrote.
#[derive(Debug, PartialEq)]
struct Step {
    what: String,
    result: Result<i64, Errno>,
    out: Vec<u8>,
}

/// A step as compared between the backends: what it did, its errno (not
/// the fd or count a success returned) and the bytes it wrote back.
fn outline(s: &Step) -> String {
    format!("{}: {:?} {:?}", s.what, s.result.map(|_| ()), s.out)
}

/// Where bpfjet's steps answer differently from the kernel's (`label`
/// names the run); both runs must have taken the same steps.
fn differences(label: &str, kernel: &[Step], ours: &[Step]) -> Vec<String> {
    let all = |steps: &[Step]| steps.iter().map(outline).collect::<Vec<_>>().join("\n");
    assert_eq!(
        kernel.len(),
        ours.len(),
        "{label}: kernel:\n{}\nbpfjet:\n{}",
        all(kernel),
        all(ours)
    );
    kernel
        .iter()
        .zip(ours)
        .filter(|(k, j)| outline(k) != outline(j))
        .map(|(k, j)| {
            format!(
                "{label}: kernel {}, bpfjet {:?} {:?}",
                outline(k),
                j.result,
                j.out
            )
        })
        .collect()
}

fn assert_no_differences(differences: &[String]) {
    assert!(
        differences.is_empty(),
        "{} differences, the first:\n{}",
        differences.len(),
        differences[..differences.len().min(10)].join("\n")
    );
}

struct Driver<'a> {
    backend: &'a dyn Backend,
    steps: Vec<Step>,
}

impl Driver<'_> {
    /// Through the attr bytes, as a caller of bpf() passes them.
    fn run(&self, cmd: Command) -> Result<i64, Errno> {
        common::run(self.backend, cmd)
    }

    fn create(&mut self, what: &str, map_type: u32, key: u32, value: u32, max: u32) -> i64 {
        let r = self.run(Command::MapCreate(MapCreate {
            map_type,
            key_size: key,
            value_size: value,
            max_entries: max,
            name: what.replace(' ', "_"),
            ..MapCreate::default()
        }));
        self.steps.push(Step {
            what: format!("create {what}"),
            result: r.map(|_| 0),
            out: Vec::new(),
        });
        r.unwrap_or(-1)
    }

    fn elem(
        &mut self,
        what: &str,
        fd: i64,
        make: fn(MapElem) -> Command,
        key: &[u8],
        value: &[u8],
        flags: u64,
    ) {
        let mut value = value.to_vec();
        let r = self.run(make(MapElem {
            map_fd: fd as u32,
            key: if key.is_empty() {
                0
            } else {
                key.as_ptr() as u64
            },
            value: if value.is_empty() {
                0
            } else {
                value.as_mut_ptr() as u64
            },
            flags,
        }));
        self.steps.push(Step {
            what: what.into(),
            result: r,
            out: value,
        });
    }
}

impl Driver<'_> {
    fn batch(&mut self, what: &str, cmd: Cmd, fd: i64, keys: &[u8], values: &[u8], count: u32) {
        let b = MapBatch {
            keys: keys.as_ptr() as u64,
            values: if values.is_empty() {
                0
            } else {
                values.as_ptr() as u64
            },
            count: Cell::new(count),
            map_fd: fd as u32,
            ..MapBatch::default()
        };
        let r = self.run_batch(cmd, &b);
        self.steps.push(Step {
            what: what.into(),
            result: r,
            out: b.count.get().to_ne_bytes().to_vec(),
        });
    }

    fn run_batch(&self, cmd: Cmd, b: &MapBatch) -> Result<i64, Errno> {
        let c = Command::MapBatch(cmd, b.clone());
        let raw = encode(&c);
        let decoded = decode(cmd as u32, &raw).expect("decodes");
        let r = self.backend.execute(&decoded);
        if let Command::MapBatch(_, out) = &decoded {
            b.count.set(out.count.get());
        }
        r
    }

    /// `MAP_LOOKUP_BATCH` until ENOENT: every call's count and result, and
    /// the (key, value) pairs collected, sorted.
    fn lookup_all(&mut self, name: &str, fd: i64, per_call: u32, by_call: bool) {
        let mut token_in = [0u8; 4];
        let mut token_out = [0u8; 4];
        let mut pairs = Vec::new();
        let mut first = true;
        for call in 0..10 {
            let mut keys = vec![0u8; 4 * per_call as usize];
            let mut vals = vec![0u8; 8 * per_call as usize];
            let b = MapBatch {
                in_batch: if first { 0 } else { token_in.as_ptr() as u64 },
                out_batch: token_out.as_mut_ptr() as u64,
                keys: keys.as_mut_ptr() as u64,
                values: vals.as_mut_ptr() as u64,
                count: Cell::new(per_call),
                map_fd: fd as u32,
                ..MapBatch::default()
            };
            let r = self.run_batch(Cmd::MapLookupBatch, &b);
            let n = b.count.get() as usize;
            for i in 0..n {
                pairs.push((
                    keys[i * 4..i * 4 + 4].to_vec(),
                    vals[i * 8..i * 8 + 8].to_vec(),
                ));
            }
            // Hash batches are per bucket in the kernel: how many elements
            // each call returns depends on the table, only the whole walk
            // and its end are comparable.
            if by_call || r.is_err() {
                self.steps.push(Step {
                    what: format!(
                        "{name} lookup batch call {}",
                        if by_call { call } else { 0 }
                    ),
                    result: r.map(|_| 0),
                    out: if by_call {
                        (n as u32).to_ne_bytes().to_vec()
                    } else {
                        Vec::new()
                    },
                });
            }
            if r.is_err() {
                break;
            }
            token_in = token_out;
            first = false;
        }
        pairs.sort();
        self.steps.push(Step {
            what: format!("{name} batch contents"),
            result: Ok(pairs.len() as i64),
            out: pairs
                .into_iter()
                .flat_map(|(k, v)| [k, v].concat())
                .collect(),
        });
    }
}

fn sequence(backend: &dyn Backend, ncpus: usize) -> Vec<Step> {
    let mut d = Driver {
        backend,
        steps: Vec::new(),
    };
    let k = |i: u32| i.to_ne_bytes().to_vec();
    let v = |i: u64| i.to_ne_bytes().to_vec();
    let h = d.create("hash", HASH, 4, 8, 3);
    for i in 1..=4 {
        d.elem(
            "update",
            h,
            Command::MapUpdateElem,
            &k(i),
            &v(u64::from(i) * 10),
            0,
        );
    }
    d.elem("update noexist", h, Command::MapUpdateElem, &k(1), &v(1), 1);
    d.elem("update exist", h, Command::MapUpdateElem, &k(9), &v(1), 2);
    d.elem(
        "update bad flags",
        h,
        Command::MapUpdateElem,
        &k(1),
        &v(1),
        8,
    );
    d.elem("lookup", h, Command::MapLookupElem, &k(2), &[0; 8], 0);
    d.elem(
        "lookup missing",
        h,
        Command::MapLookupElem,
        &k(7),
        &[0; 8],
        0,
    );
    d.elem("delete", h, Command::MapDeleteElem, &k(2), &[], 0);
    d.elem("delete again", h, Command::MapDeleteElem, &k(2), &[], 0);
    d.elem(
        "lookup_and_delete",
        h,
        Command::MapLookupAndDeleteElem,
        &k(3),
        &[0; 8],
        0,
    );
    // Walk every key; the order is the table's, so compare the set.
    let mut keys = Vec::new();
    let mut prev: Option<Vec<u8>> = None;
    loop {
        let mut next = [0u8; 4];
        let r = d.run(Command::MapGetNextKey(MapElem {
            map_fd: h as u32,
            key: prev.as_ref().map_or(0, |p| p.as_ptr() as u64),
            value: next.as_mut_ptr() as u64,
            flags: 0,
        }));
        if r.is_err() {
            d.steps.push(Step {
                what: "walk end".into(),
                result: r,
                out: Vec::new(),
            });
            break;
        }
        keys.push(u32::from_ne_bytes(next));
        prev = Some(next.to_vec());
    }
    keys.sort_unstable();
    d.steps.push(Step {
        what: "keys".into(),
        result: Ok(keys.len() as i64),
        out: keys.iter().flat_map(|k| k.to_ne_bytes()).collect(),
    });
    d.elem("freeze", h, Command::MapFreeze, &[], &[], 0);
    d.elem("update frozen", h, Command::MapUpdateElem, &k(1), &v(5), 0);

    let a = d.create("array", ARRAY, 4, 4, 4);
    d.elem("array update", a, Command::MapUpdateElem, &k(3), &k(33), 0);
    d.elem(
        "array out of range",
        a,
        Command::MapUpdateElem,
        &k(4),
        &k(1),
        0,
    );
    d.elem("array noexist", a, Command::MapUpdateElem, &k(0), &k(1), 1);
    d.elem("array delete", a, Command::MapDeleteElem, &k(0), &[], 0);
    d.elem("array lookup", a, Command::MapLookupElem, &k(3), &[0; 4], 0);

    // Per-CPU values: one 8-byte slot per possible CPU.
    let p = d.create("percpu", PERCPU_ARRAY, 4, 4, 2);
    let slots: Vec<u8> = (0..ncpus as u64)
        .flat_map(|c| (c + 1).to_ne_bytes())
        .collect();
    d.elem("percpu update", p, Command::MapUpdateElem, &k(1), &slots, 0);
    d.elem(
        "percpu lookup",
        p,
        Command::MapLookupElem,
        &k(1),
        &vec![0; ncpus * 8],
        0,
    );

    let q = d.create("queue", QUEUE, 0, 4, 2);
    d.elem("push", q, Command::MapUpdateElem, &[], &k(5), 0);
    d.elem("push", q, Command::MapUpdateElem, &[], &k(6), 0);
    d.elem("push full", q, Command::MapUpdateElem, &[], &k(7), 0);
    d.elem("peek", q, Command::MapLookupElem, &[], &[0; 4], 0);
    d.elem("pop", q, Command::MapLookupAndDeleteElem, &[], &[0; 4], 0);

    // Batches: update 6, read back 4 at a time, delete 2.
    for (name, ty) in [("batch_hash", HASH), ("batch_array", ARRAY)] {
        let b = d.create(name, ty, 4, 8, 8);
        let keys: Vec<u8> = (0..6u32).flat_map(|i| i.to_ne_bytes()).collect();
        let vals: Vec<u8> = (0..6u64).flat_map(|i| (i * 3).to_ne_bytes()).collect();
        d.batch(
            &format!("{name} update"),
            Cmd::MapUpdateBatch,
            b,
            &keys,
            &vals,
            6,
        );
        d.lookup_all(name, b, 4, ty == ARRAY);
        d.batch(
            &format!("{name} delete"),
            Cmd::MapDeleteBatch,
            b,
            &keys[..8],
            &[],
            2,
        );
        d.lookup_all(name, b, 4, ty == ARRAY);
        // SAFETY: closing an fd this test created.
        unsafe { libc::close(b as i32) };
    }

    // A devmap entry names a device of the caller's namespace: the
    // loopback exists, ifindex 999999 does not (EINVAL); 0 clears an
    // array slot and is refused in a hash.
    for (name, ty) in [("devmap", DEVMAP), ("devmap_hash", DEVMAP_HASH)] {
        let m = d.create(name, ty, 4, 4, 2);
        for (what, ifindex) in [("lo", 1u32), ("missing device", 999_999), ("zero", 0)] {
            d.elem(
                &format!("{name} update {what}"),
                m,
                Command::MapUpdateElem,
                &k(0),
                &ifindex.to_ne_bytes(),
                0,
            );
        }
        if m >= 0 {
            // SAFETY: closing an fd this test created.
            unsafe { libc::close(m as i32) };
        }
    }

    d.create("bad type", 999, 4, 4, 1);
    d.create("zero key", HASH, 0, 4, 1);
    d.elem("bad fd", 100_000, Command::MapLookupElem, &k(1), &[0; 8], 0);

    for fd in [h, a, p, q] {
        if fd >= 0 {
            // SAFETY: closing fds this test created.
            unsafe { libc::close(fd as i32) };
        }
    }
    d.steps
}

#[test]
fn map_commands_match_the_kernel() {
    if !kernel_backend_usable() {
        return;
    }
    let jet_ns = JetNs::open("");
    let ncpus = bpfjet_runtime::possible_cpus();
    let jet = &jet_ns.backend;
    let kernel = sequence(&KernelBackend, ncpus);
    let ours = sequence(jet, ncpus);
    drop(jet_ns);
    assert_no_differences(&differences("map commands", &kernel, &ours));
    assert!(kernel.len() > 30);
}

/// Map types of the random command streams: (name, type, key size, value
/// size, max entries, flags).
const RANDOM_MAPS: &[(&str, u32, u32, u32, u32, u32)] = &[
    ("hash", HASH, 4, 8, 6, 0),
    ("hash no prealloc", HASH, 4, 8, 6, 1),
    ("percpu hash", 5, 4, 8, 6, 0),
    ("array", ARRAY, 4, 8, 6, 0),
    ("percpu array", PERCPU_ARRAY, 4, 4, 6, 0),
    // Room for every key: which element an LRU evicts is not the kernel's
    // (crates/maps/src/lru.rs).
    ("lru hash", 9, 4, 8, 1024, 0),
    ("queue", QUEUE, 0, 8, 4, 0),
    ("stack", 23, 0, 8, 4, 0),
    ("lpm", 11, 8, 8, 6, 1),
    // BPF_F_RDONLY / BPF_F_WRONLY: what user space may do with the map.
    ("array read-only", ARRAY, 4, 8, 6, 1 << 3),
    ("hash write-only", HASH, 4, 8, 6, 1 << 4),
    // One LRU list per CPU (BPF_F_NO_COMMON_LRU), never full.
    ("percpu lru hash", 10, 4, 8, 1024, 1 << 1),
];

/// Random `bpf()` element commands on [`RANDOM_MAPS`]: update with every
/// flag combination (invalid ones and `BPF_F_LOCK` on values without a
/// lock included), lookup (with flags), delete, lookup-and-delete (with
/// flags), an array's and an LPM trie's next key, update and delete
/// batches of three (every element flag), and now and then a freeze. A
/// hash map's next key and lookup batches are left out: the kernel walks
/// its buckets in an order seeded at random.
fn random_sequence(backend: &dyn Backend, ncpus: usize, seed: u64, n: usize) -> Vec<Step> {
    let mut d = Driver {
        backend,
        steps: Vec::new(),
    };
    let fds: Vec<i64> = RANDOM_MAPS
        .iter()
        .enumerate()
        .map(|(m, &(name, ty, key, value, max, flags))| {
            let r = d.run(Command::MapCreate(MapCreate {
                map_type: ty,
                key_size: key,
                value_size: value,
                max_entries: max,
                map_flags: flags,
                name: format!("r{m}"),
                ..MapCreate::default()
            }));
            d.steps.push(Step {
                what: format!("create {name}"),
                result: r.map(|_| 0),
                out: Vec::new(),
            });
            r.unwrap_or(-1)
        })
        .collect();
    let mut next = bpfjet_testsupport::xorshift(seed);
    for i in 0..n {
        let r = next();
        let m = (r % RANDOM_MAPS.len() as u64) as usize;
        let (name, ty, key_size, value_size, _, _) = RANDOM_MAPS[m];
        let fd = fds[m];
        let k = ((r >> 8) % 9) as u32;
        let key: Vec<u8> = match key_size {
            0 => Vec::new(),
            // LPM: prefix length (0..40, past 32 invalid), address.
            8 => [((r >> 40) % 40) as u32, k << 28 | k]
                .iter()
                .flat_map(|w| w.to_ne_bytes())
                .collect(),
            _ => k.to_ne_bytes().to_vec(),
        };
        let percpu = ty == 5 || ty == PERCPU_ARRAY || ty == 10;
        // Per-CPU values: one 8-byte-rounded slot per possible CPU.
        let slot = (value_size as usize).div_ceil(8) * 8;
        let len = if percpu {
            slot * ncpus
        } else {
            value_size as usize
        };
        let value: Vec<u8> = (0..len).map(|b| (r >> 16) as u8 ^ b as u8).collect();
        let flags = match (r >> 24) % 16 {
            0..=5 => 0,
            6 | 7 => 1,
            8 | 9 => 2,
            10 => 4,
            11 => 5,
            _ => (r >> 32) % 8,
        };
        let what = |op: &str| format!("{i}: {name} {op} key {k} flags {flags}");
        if (r >> 50).is_multiple_of(200) {
            // Now and then a map is frozen: user space may not write it
            // any more (EPERM), programs still may.
            d.elem(&what("freeze"), fd, Command::MapFreeze, &[], &[], 0);
            continue;
        }
        if key_size == 4 && (r >> 56).is_multiple_of(8) {
            // A batch of three keys and values: update (every flag) or
            // delete; the kernel's generic batches stop at the first
            // error, and the count says how far they went.
            let keys: Vec<u8> = (0..3u64)
                .flat_map(|j| (((r >> (j * 4)) % 9) as u32).to_ne_bytes())
                .collect();
            let values: Vec<u8> = (0..3).flat_map(|_| value.clone()).collect();
            let (cmd, op) = if (r >> 60).is_multiple_of(2) {
                (Cmd::MapUpdateBatch, "update batch")
            } else {
                (Cmd::MapDeleteBatch, "delete batch")
            };
            let b = MapBatch {
                keys: keys.as_ptr() as u64,
                values: if cmd == Cmd::MapUpdateBatch {
                    values.as_ptr() as u64
                } else {
                    0
                },
                count: Cell::new(3),
                map_fd: fd as u32,
                elem_flags: flags,
                ..MapBatch::default()
            };
            let res = d.run_batch(cmd, &b);
            d.steps.push(Step {
                what: what(op),
                result: res,
                out: b.count.get().to_ne_bytes().to_vec(),
            });
            continue;
        }
        match (r >> 28) % 8 {
            0..=2 => d.elem(
                &what("update"),
                fd,
                Command::MapUpdateElem,
                &key,
                &value,
                flags,
            ),
            3 => d.elem(
                &what("lookup"),
                fd,
                Command::MapLookupElem,
                &key,
                &vec![0; len],
                flags & 4,
            ),
            4 | 5 => d.elem(&what("delete"), fd, Command::MapDeleteElem, &key, &[], 0),
            6 => d.elem(
                &what("lookup and delete"),
                fd,
                Command::MapLookupAndDeleteElem,
                &key,
                &vec![0; len],
                flags & 4,
            ),
            _ if ty == ARRAY || ty == PERCPU_ARRAY || ty == 11 => d.elem(
                &what("next key"),
                fd,
                Command::MapGetNextKey,
                &key,
                // The next key lands in `value`'s place.
                &vec![0; key_size as usize],
                0,
            ),
            _ => d.elem(
                &what("lookup"),
                fd,
                Command::MapLookupElem,
                &key,
                &vec![0; len],
                0,
            ),
        }
    }
    for fd in fds.into_iter().filter(|&fd| fd >= 0) {
        // SAFETY: closing fds this test created.
        unsafe { libc::close(fd as i32) };
    }
    d.steps
}

#[test]
fn random_map_commands_match_the_kernel() {
    if !kernel_backend_usable() {
        return;
    }
    let jet_ns = JetNs::open("r");
    let ncpus = bpfjet_runtime::possible_cpus();
    let jet = &jet_ns.backend;
    let mut differences = Vec::new();
    let mut answers = std::collections::BTreeMap::new();
    for seed in [3u64, 0x5eed_1234, 0x00fe_edf0_0d77] {
        let kernel = random_sequence(&KernelBackend, ncpus, seed, 1500);
        let ours = random_sequence(jet, ncpus, seed, 1500);
        for k in &kernel {
            *answers
                .entry(format!("{:?}", k.result.map(|_| ())))
                .or_insert(0) += 1;
        }
        differences.extend(self::differences(
            &format!("seed {seed:#x}"),
            &kernel,
            &ours,
        ));
    }
    drop(jet_ns);
    assert_no_differences(&differences);
    // The streams reached the answers they are for.
    // EPERM, ENOENT, EEXIST, E2BIG, EINVAL, ENOSPC, ENOTSUPP.
    for errno in [1, 2, 17, 7, 22, 28, 524] {
        let want = format!("Err(Errno({errno}))");
        assert!(
            answers.contains_key(&want),
            "no command answered {want}: {answers:?}"
        );
    }
    assert!(answers.contains_key("Ok(())"), "{answers:?}");
}

/// Random `BPF_MAP_CREATE` attributes on every map type bpfjet has: key
/// and value sizes (0, odd, past the limits), entry counts (0, 1, powers
/// of two and not), every flag alone and random flag words, `map_extra`;
/// each must be refused with the kernel's errno or created by both. This
/// is what libbpf's feature probes and map creation see. Attributes whose
/// memory would exceed 64 MiB are left out (the kernel may answer ENOMEM
/// where bpfjet's lazily backed memory does not).
#[test]
fn random_map_creates_match_the_kernel() {
    if !kernel_backend_usable() {
        return;
    }
    let jet_ns = JetNs::open("c");
    let jet = &jet_ns.backend;
    const TYPES: &[u32] = &[
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14, 16, 17, 22, 23, 25, 27, 30, 31,
    ];
    const KEYS: &[u32] = &[0, 1, 2, 4, 8, 12, 16, 20, 33, 64, 256, 512, 513];
    const VALUES: &[u32] = &[
        0, 1, 2, 4, 8, 12, 16, 20, 64, 4096, 32768, 32769, 65536, 65537,
    ];
    const ENTRIES: &[u32] = &[0, 1, 2, 3, 4, 64, 100, 1024, 4096, 65536, 1 << 20];
    let mut next = bpfjet_testsupport::xorshift(0x0f0f_7777_3131_aaa5u64);
    let mut differences = Vec::new();
    let mut answers = std::collections::BTreeMap::new();
    let mut tried = 0;
    while tried < 30_000 {
        let r = next();
        let pick = |l: &[u32], s: u32| l[((r >> s) % l.len() as u64) as usize];
        let map_type = pick(TYPES, 0);
        let key_size = pick(KEYS, 8);
        let value_size = pick(VALUES, 16);
        let max_entries = pick(ENTRIES, 24);
        if (u64::from(key_size) + u64::from(value_size) + 64) * u64::from(max_entries) > 64 << 20
            || (map_type == 27 || map_type == 31) && max_entries > 1 << 20
        {
            continue;
        }
        let map_flags = match (r >> 32) % 8 {
            0..=3 => 0,
            4..=6 => 1 << ((r >> 40) % 18),
            _ => (r >> 40) as u32,
        };
        let map_extra = match (r >> 60) % 4 {
            0 => (r >> 44) % 20,
            1 => 1,
            _ => 0,
        };
        tried += 1;
        let create = MapCreate {
            map_type,
            key_size,
            value_size,
            max_entries,
            map_flags,
            map_extra,
            name: "c".into(),
            ..MapCreate::default()
        };
        let mut results = Vec::new();
        for backend in [&KernelBackend as &dyn Backend, jet] {
            let d = Driver {
                backend,
                steps: Vec::new(),
            };
            let res = d.run(Command::MapCreate(create.clone()));
            let mut info = vec![0u8; 88];
            if let Ok(fd) = res {
                let got = d.run(Command::ObjGetInfoByFd(bpfjet_sys::GetInfo {
                    bpf_fd: fd as u32,
                    info_len: Cell::new(info.len() as u32),
                    info: info.as_mut_ptr() as u64,
                }));
                assert!(got.is_ok(), "info of a created map: {got:?}");
                // SAFETY: closing the fd this create returned.
                unsafe { libc::close(fd as i32) };
            }
            // struct bpf_map_info as the kernel fills it: type, sizes,
            // entries, flags, name, map_extra (not the id).
            let seen: Vec<u8> = [&info[0..4], &info[8..40], &info[80..88]].concat();
            results.push(res.map(|_| seen));
        }
        *answers
            .entry(format!("{:?}", results[0].as_ref().map(|_| ())))
            .or_insert(0) += 1;
        if results[0] != results[1] {
            differences.push(format!(
                "type {map_type} key {key_size} value {value_size} entries {max_entries} flags {map_flags:#x} extra {map_extra}: kernel {:?}, bpfjet {:?}",
                results[0], results[1]
            ));
        }
    }
    drop(jet_ns);
    assert_no_differences(&differences);
    assert!(answers.len() >= 3, "{answers:?}");
}

/// `BPF_F_RDONLY` / `BPF_F_WRONLY` are an fd's, not the map's: a map
/// created read-only is writable through an fd opened by id without
/// flags, a read-only fd opened by id refuses writes, and `open_flags`
/// other than those two (or both) are EINVAL.
fn fd_access_sequence(backend: &dyn Backend) -> Vec<Step> {
    let mut d = Driver {
        backend,
        steps: Vec::new(),
    };
    let k = |i: u32| i.to_ne_bytes().to_vec();
    let v = |i: u64| i.to_ne_bytes().to_vec();
    let id_of = |d: &mut Driver, fd: i64| -> u32 {
        let mut info = vec![0u8; 88];
        let r = d.run(Command::ObjGetInfoByFd(bpfjet_sys::GetInfo {
            bpf_fd: fd as u32,
            info_len: Cell::new(88),
            info: info.as_mut_ptr() as u64,
        }));
        assert!(r.is_ok(), "{r:?}");
        u32::from_ne_bytes(info[4..8].try_into().unwrap())
    };
    let mut fds = Vec::new();
    for (name, ty, flags) in [("ro array", ARRAY, 1u32 << 3), ("wo hash", HASH, 1 << 4)] {
        let r = d.run(Command::MapCreate(MapCreate {
            map_type: ty,
            key_size: 4,
            value_size: 8,
            max_entries: 4,
            map_flags: flags,
            name: "acc".into(),
            ..MapCreate::default()
        }));
        let fd = r.expect("created");
        fds.push(fd);
        d.elem(
            &format!("{name}: update"),
            fd,
            Command::MapUpdateElem,
            &k(1),
            &v(7),
            0,
        );
        d.elem(
            &format!("{name}: lookup"),
            fd,
            Command::MapLookupElem,
            &k(1),
            &[0; 8],
            0,
        );
        let id = id_of(&mut d, fd);
        for open_flags in [0u32, 1 << 3, 1 << 4, (1 << 3) | (1 << 4), 1 << 7] {
            let r = d.run(Command::GetFdById(bpfjet_sys::GetFdById {
                kind: bpfjet_sys::IdKind::Map,
                id,
                open_flags,
            }));
            d.steps.push(Step {
                what: format!("{name}: open by id, flags {open_flags:#x}"),
                result: r.map(|_| 0),
                out: Vec::new(),
            });
            let Ok(by_id) = r else { continue };
            fds.push(by_id);
            let what = |op: &str| format!("{name}: fd by id ({open_flags:#x}): {op}");
            d.elem(
                &what("update"),
                by_id,
                Command::MapUpdateElem,
                &k(1),
                &v(9),
                0,
            );
            d.elem(
                &what("lookup"),
                by_id,
                Command::MapLookupElem,
                &k(1),
                &[0; 8],
                0,
            );
            d.elem(
                &what("next key"),
                by_id,
                Command::MapGetNextKey,
                &k(1),
                &[0; 4],
                0,
            );
            if ty == HASH {
                d.elem(
                    &what("delete"),
                    by_id,
                    Command::MapDeleteElem,
                    &k(3),
                    &[],
                    0,
                );
            }
        }
    }
    for fd in fds {
        // SAFETY: closing fds this test made.
        unsafe { libc::close(fd as i32) };
    }
    d.steps
}

#[test]
fn map_access_belongs_to_the_fd() {
    if !kernel_backend_usable() {
        return;
    }
    let jet_ns = JetNs::open("a");
    let jet = &jet_ns.backend;
    let kernel = fd_access_sequence(&KernelBackend);
    let ours = fd_access_sequence(jet);
    drop(jet_ns);
    assert_no_differences(&differences("fd access", &kernel, &ours));
    // The sequence saw both answers.
    assert!(kernel.iter().any(|s| s.result == Err(Errno::EPERM)));
    assert!(kernel
        .iter()
        .any(|s| s.what.contains("fd by id (0x0): update") && s.result.is_ok()));
}

/// Map-in-map through `bpf()`: outer ARRAY_OF_MAPS and HASH_OF_MAPS built
/// on random inner templates (type, sizes, entries, `BPF_F_INNER_MAP`), and
/// random candidate inner maps stored into them: the kernel's
/// `bpf_map_meta_equal` rules decide, and bpfjet must give its errnos;
/// a lookup through the outer map finds the stored map (its id) or
/// nothing, and deletes answer as the kernel's.
fn map_in_map_sequence(backend: &dyn Backend, seed: u64) -> Vec<Step> {
    let mut d = Driver {
        backend,
        steps: Vec::new(),
    };
    let mut next = bpfjet_testsupport::xorshift(seed);
    let id_of = |d: &Driver, fd: i64| -> u32 {
        let mut info = vec![0u8; 88];
        let r = d.run(Command::ObjGetInfoByFd(bpfjet_sys::GetInfo {
            bpf_fd: fd as u32,
            info_len: Cell::new(88),
            info: info.as_mut_ptr() as u64,
        }));
        assert!(r.is_ok(), "{r:?}");
        u32::from_ne_bytes(info[4..8].try_into().unwrap())
    };
    // (type, key, value, entries, flags) of inner maps.
    let random_inner = |next: &mut dyn FnMut() -> u64| -> (u32, u32, u32, u32, u32) {
        let r = next();
        let ty = [HASH, ARRAY, 9, PERCPU_ARRAY, QUEUE][(r % 5) as usize];
        let key = if ty == QUEUE { 0 } else { 4 };
        let value = [4u32, 8][((r >> 8) % 2) as usize];
        let max = [4u32, 8][((r >> 12) % 2) as usize];
        let flags = if ty == ARRAY && (r >> 16).is_multiple_of(3) {
            1 << 12 // BPF_F_INNER_MAP
        } else {
            0
        };
        (ty, key, value, max, flags)
    };
    let mut fds = Vec::new();
    for round in 0..40 {
        let template = random_inner(&mut next);
        let t = d.run(Command::MapCreate(MapCreate {
            map_type: template.0,
            key_size: template.1,
            value_size: template.2,
            max_entries: template.3,
            map_flags: template.4,
            name: "tmpl".into(),
            ..MapCreate::default()
        }));
        d.steps.push(Step {
            what: format!("{round}: template {template:?}"),
            result: t.map(|_| 0),
            out: Vec::new(),
        });
        let Ok(t) = t else { continue };
        fds.push(t);
        let outer_type = if next().is_multiple_of(2) { 12 } else { 13 };
        let outer = d.run(Command::MapCreate(MapCreate {
            map_type: outer_type,
            key_size: 4,
            value_size: 4,
            max_entries: 4,
            inner_map_fd: t as u32,
            name: "outer".into(),
            ..MapCreate::default()
        }));
        d.steps.push(Step {
            what: format!("{round}: outer {outer_type} on {template:?}"),
            result: outer.map(|_| 0),
            out: Vec::new(),
        });
        let Ok(outer) = outer else { continue };
        fds.push(outer);
        for slot in 0..4u32 {
            let cand = if next().is_multiple_of(3) {
                template
            } else {
                random_inner(&mut next)
            };
            let c = d.run(Command::MapCreate(MapCreate {
                map_type: cand.0,
                key_size: cand.1,
                value_size: cand.2,
                max_entries: cand.3,
                map_flags: cand.4,
                name: "cand".into(),
                ..MapCreate::default()
            }));
            let Ok(c) = c else { continue };
            fds.push(c);
            let key = slot.to_ne_bytes();
            let value = (c as u32).to_ne_bytes();
            // The fd numbers differ between the backends: only the answer.
            let r = d.run(Command::MapUpdateElem(bpfjet_sys::MapElem {
                map_fd: outer as u32,
                key: key.as_ptr() as u64,
                value: value.as_ptr() as u64,
                flags: 0,
            }));
            d.steps.push(Step {
                what: format!(
                    "{round}: store {cand:?} in slot {slot} of {outer_type} on {template:?}"
                ),
                result: r.map(|_| 0),
                out: Vec::new(),
            });
            // What the slot holds now: the candidate's id, or nothing.
            let mut out = [0u8; 4];
            let r = d.run(Command::MapLookupElem(bpfjet_sys::MapElem {
                map_fd: outer as u32,
                key: key.as_ptr() as u64,
                value: out.as_mut_ptr() as u64,
                flags: 0,
            }));
            let holds = r.is_ok() && u32::from_ne_bytes(out) == id_of(&d, c);
            d.steps.push(Step {
                what: format!("{round}: slot {slot} holds the candidate"),
                result: r.map(|_| 0),
                out: vec![u8::from(holds)],
            });
            if next().is_multiple_of(4) {
                d.elem(
                    &format!("{round}: delete slot {slot}"),
                    outer,
                    Command::MapDeleteElem,
                    &key,
                    &[],
                    0,
                );
            }
        }
    }
    for fd in fds {
        // SAFETY: closing fds this test made.
        unsafe { libc::close(fd as i32) };
    }
    d.steps
}

#[test]
fn map_in_map_commands_match_the_kernel() {
    if !kernel_backend_usable() {
        return;
    }
    let jet_ns = JetNs::open("m");
    let mut differences = Vec::new();
    for seed in [21u64, 0x00ab_cdef_0101] {
        let kernel = map_in_map_sequence(&KernelBackend, seed);
        let ours = map_in_map_sequence(&jet_ns.backend, seed);
        differences.extend(self::differences(
            &format!("seed {seed:#x}"),
            &kernel,
            &ours,
        ));
    }
    drop(jet_ns);
    assert_no_differences(&differences);
}
