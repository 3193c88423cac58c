//! One command sequence through both backends — the kernel's `bpf()` and
//! bpfjet's — compared result by result: errnos, values, key walks.

use bpfjet_server::{BpfjetBackend, Namespace};
use bpfjet_sys::{decode, encode, Backend, Command, Errno, KernelBackend, MapCreate, MapElem};

const HASH: u32 = 1;
const ARRAY: u32 = 2;
const PERCPU_ARRAY: u32 = 6;
const QUEUE: u32 = 22;

/// What one step observed: the result and the bytes it wrote.
#[derive(Debug, PartialEq)]
struct Step {
    what: String,
    result: Result<i64, Errno>,
    out: Vec<u8>,
}

struct Driver<'a> {
    backend: &'a dyn Backend,
    steps: Vec<Step>,
}

impl Driver<'_> {
    /// Through the attr bytes, as a caller of bpf() passes them.
    fn run(&self, cmd: Command) -> Result<i64, Errno> {
        let raw = encode(&cmd);
        let cmd = decode(cmd.cmd() as u32, &raw).expect("a command decodes from its encoding");
        self.backend.execute(&cmd)
    }

    fn create(&mut self, what: &str, map_type: u32, key: u32, value: u32, max: u32) -> i64 {
        let r = self.run(Command::MapCreate(MapCreate {
            map_type,
            key_size: key,
            value_size: value,
            max_entries: max,
            name: what.into(),
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
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIPPED: the kernel backend needs root");
        return;
    }
    let run = std::env::temp_dir().join(format!("bpfjet-backends-{}", std::process::id()));
    let name = format!("backends{}", std::process::id());
    let ns = Namespace::open(&name, &run).expect("namespace");
    let ncpus = bpfjet_runtime::possible_cpus();
    let jet = BpfjetBackend::new(ns);
    let kernel = sequence(&KernelBackend, ncpus);
    let ours = sequence(&jet, ncpus);
    let _ = std::fs::remove_dir_all(&run);
    for id in jet.namespace().instance().list() {
        let _ = jet.namespace().instance().remove_map(id.id);
    }
    let _ = bpfjet_maps::Instance::remove_stale(&name);
    assert_eq!(kernel.len(), ours.len());
    let mut differences = Vec::new();
    for (k, j) in kernel.iter().zip(&ours) {
        let k_ok = k.result.map(|_| ());
        let j_ok = j.result.map(|_| ());
        if k_ok != j_ok || k.out != j.out {
            differences.push(format!(
                "{}: kernel {:?} {:?}, bpfjet {:?} {:?}",
                k.what, k.result, k.out, j.result, j.out
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "differences:\n{}",
        differences.join("\n")
    );
    assert!(kernel.len() > 30);
}
