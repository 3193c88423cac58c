//! `bpfjet run` on a pcap with devmap entry programs and `BPF_F_BROADCAST`
//! (the runtime's `worker/egress.rs`), on the interpreter, the JIT and an
//! AOT artifact:
//! `tests/preload/devmap_egress.bpf.c` with its devmaps set through
//! STATE.json (`value` the ifindex, `prog` the entry's program), then the
//! per-interface captures (`--out DIR --split-by-target`), whose payloads
//! the egress program stamped. The kernel's own behaviour on live interfaces is
//! checked by `tests/preload/devmap_egress.sh`; this test checks the
//! embedded data plane against the same expectations, and the STATE.json
//! round trip and refusals against the kernel engine's.

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use support::Scratch;

const IN: u32 = 1;
const OUT1: u32 = 7;
const OUT2: u32 = 9;

/// One UDP datagram to `port` whose payload is 8 zero bytes, `mark`, then
/// a tag: the shape the test's egress program stamps.
fn frame(port: u16, mark: u8, n: u8) -> Vec<u8> {
    let mut payload = vec![0u8; 8];
    payload.push(mark);
    payload.extend_from_slice(format!("{port}-{n}").as_bytes());
    payload.resize(24, b'.');
    let udp_len = 8 + payload.len() as u16;
    let mut f = Vec::new();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00]);
    let total = 20 + udp_len;
    f.extend_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0x40,
        0,
        64,
        17,
        0,
        0,
    ]);
    f.extend_from_slice(&[10, 0, 0, 2, 10, 0, 0, 1]);
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&payload);
    f
}

fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        if w == 0x0004_0002 {
            out.extend_from_slice(&2u16.to_le_bytes());
            out.extend_from_slice(&4u16.to_le_bytes());
        } else {
            out.extend_from_slice(&w.to_le_bytes());
        }
    }
    for f in frames {
        for w in [0u32, 0, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

/// The records of a pcap file (none when it does not exist).
fn records(path: &str) -> Vec<Vec<u8>> {
    let Ok(bytes) = std::fs::read(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let len = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        out.push(bytes[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    out
}

/// "port tag egress ingress" of a captured frame (the egress program's
/// stamp is 0 0 where no program ran).
fn describe(f: &[u8]) -> String {
    let p = &f[42..];
    let port = u16::from_be_bytes([f[36], f[37]]);
    let egress = u32::from_ne_bytes(p[..4].try_into().unwrap());
    let ingress = u32::from_ne_bytes(p[4..8].try_into().unwrap());
    let tag = String::from_utf8_lossy(&p[9..])
        .trim_end_matches('.')
        .to_string();
    format!("{port} {tag} {egress} {ingress}")
}

fn given_state() -> Value {
    let key = |k: u32| hex(&k.to_ne_bytes());
    let ifx = |i: u32| hex(&i.to_ne_bytes());
    json!({
        "tx_ports": [
            {"key": key(0), "value": ifx(OUT1), "prog": "xdp_egress"},
            {"key": key(1), "value": ifx(OUT1)},
        ],
        "ports": [
            {"key": key(1), "value": ifx(IN), "prog": "xdp_egress"},
            {"key": key(2), "value": ifx(OUT1), "prog": "xdp_egress"},
            {"key": key(3), "value": ifx(OUT2), "prog": "xdp_egress"},
        ],
        "cpus": [
            {"key": key(0), "value": ifx(64), "prog": "xdp_cpu"},
        ],
    })
}

fn remove_instance(name: &str) {
    let prefix = format!("bpfjet.{name}.");
    for e in std::fs::read_dir("/dev/shm").unwrap().flatten() {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn object(dir: &Scratch) -> String {
    let source =
        std::fs::read_to_string(support::repo_root().join("tests/preload/devmap_egress.bpf.c"))
            .unwrap();
    dir.compile_c("devmap_egress", &source)
}

#[test]
fn entry_programs_and_broadcast_on_both_engines() {
    let dir = Scratch::new("devmap-egress");
    let obj = object(&dir);
    let state = dir.file("state.json", given_state().to_string());
    let mut frames = Vec::new();
    for port in [7001u16, 7002, 7003, 7004, 7005] {
        for (n, mark) in [(1u8, b'k'), (2, b'k'), (3, b'D')] {
            frames.push(frame(port, mark, n));
        }
    }
    let input = dir.file("in.pcap", pcap(&frames));
    // Where each copy goes and how it leaves: per port, the peers the
    // kernel run of tests/preload/devmap_egress.sh captures.
    let s = |port: u16, n: u8, egress: u32| format!("{port} {port}-{n} {egress} {IN}");
    let plain = |port: u16, n: u8| format!("{port} {port}-{n} 0 0");
    let mut want: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for n in [1, 2] {
        want.entry(OUT1).or_default().extend([
            s(7001, n, OUT1),
            s(7002, n, OUT1),
            s(7004, n, OUT1),
        ]);
        want.entry(OUT2)
            .or_default()
            .extend([s(7002, n, OUT2), s(7004, n, OUT2)]);
        want.entry(IN).or_default().push(s(7004, n, IN));
    }
    for n in [1, 2, 3] {
        want.entry(OUT1).or_default().push(plain(7003, n));
    }
    for v in want.values_mut() {
        v.sort();
    }
    // The CPUMAP entry's program stamps 0xc0c0: its frames reach the
    // stack (pass.pcap).
    let to_stack: Vec<String> = [1, 2]
        .iter()
        .map(|&n| format!("7005 7005-{n} {} {IN}", 0xc0c0))
        .collect();
    // The JIT from an AOT artifact too: its entry programs run its code.
    let artifact = dir.path("devmap_egress.aot");
    let compiled = support::bpfjet(&["compile", &obj, "-o", &artifact], b"");
    assert_eq!(compiled.code, Some(0), "{}", compiled.stderr);
    for engine in ["interp", "jit", "aot"] {
        let out = dir.path(&format!("out-{engine}"));
        let name = format!("devmap-{engine}-{}", std::process::id());
        let how: [&str; 2] = if engine == "aot" {
            ["--aot", &artifact]
        } else {
            ["--engine", engine]
        };
        let run = support::bpfjet(
            &[
                "run",
                &obj,
                "--prog",
                "xdp_fwd",
                how[0],
                how[1],
                "--maps",
                &state,
                "--name",
                &name,
                "--force",
                "--json",
                "--pcap",
                &input,
                "--ingress-ifindex",
                &IN.to_string(),
                "--out",
                &out,
                "--split-by-target",
            ],
            b"",
        );
        assert!((run.code == Some(0)), "{engine}: {}", run.stderr);
        let mut got: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for ifindex in [IN, OUT1, OUT2] {
            let mut v: Vec<String> = records(&format!("{out}/redirect-if{ifindex}.pcap"))
                .iter()
                .map(|f| describe(f))
                .collect();
            v.sort();
            if !v.is_empty() {
                got.insert(ifindex, v);
            }
        }
        assert_eq!(got, want, "{engine}: frames per interface");
        let mut stack: Vec<String> = records(&format!("{out}/pass.pcap"))
            .iter()
            .map(|f| describe(f))
            .collect();
        stack.sort();
        assert_eq!(stack, to_stack, "{engine}: frames to the stack");
        remove_instance(&name);
    }
}

#[test]
fn an_entry_program_must_be_a_devmap_program() {
    let dir = Scratch::new("devmap-egress-refusal");
    let obj = object(&dir);
    let mut bad = given_state();
    bad["tx_ports"][0]["prog"] = json!("xdp_plain");
    let state = dir.file("state.json", bad.to_string());
    let input = dir.file("in.pcap", pcap(&[frame(7001, b'k', 1)]));
    let run = support::bpfjet(
        &[
            "run",
            &obj,
            "--prog",
            "xdp_fwd",
            "--maps",
            &state,
            "--name",
            &format!("devmap-refusal-{}", std::process::id()),
            "--force",
            "--pcap",
            &input,
        ],
        b"",
    );
    assert_ne!(run.code, Some(0));
    assert!(
        run.stderr.contains("xdp_plain") && run.stderr.contains("xdp/devmap"),
        "{}",
        run.stderr
    );
}

#[test]
fn the_kernel_engine_takes_and_dumps_entry_programs_alike() {
    let dir = Scratch::new("devmap-egress-kernel");
    let obj = object(&dir);
    let Some(kernel) = support::kernel_object(std::path::Path::new(&obj), "devmap entry programs")
    else {
        return;
    };
    // The kernel wants devices that exist: loopback everywhere.
    let lo = hex(&1u32.to_ne_bytes());
    let mut given = given_state();
    for m in ["tx_ports", "ports"] {
        for e in given[m].as_array_mut().unwrap() {
            e["value"] = json!(lo);
        }
    }
    let state: bpfjet_maps::state::MapState = serde_json::from_value(given.clone()).unwrap();
    kernel
        .apply_state(&state)
        .expect("the kernel takes the state");
    let dumped = kernel.dump_maps().expect("dump");
    let ours = support::OnEngine::load(std::path::Path::new(&obj), support::Engine::Interp);
    ours.loaded()
        .apply_state(&state)
        .expect("bpfjet takes the state");
    let our_dump = ours.loaded().dump_state().expect("dump");
    for m in ["tx_ports", "ports", "cpus"] {
        assert_eq!(
            serde_json::to_value(&dumped[m]).unwrap(),
            given[m],
            "kernel: {m}"
        );
        assert_eq!(
            serde_json::to_value(&our_dump[m]).unwrap(),
            given[m],
            "bpfjet: {m}"
        );
    }
    // And refuses a program of another kind, as bpfjet does; and a frags
    // program after the map's first (non-frags) entry program.
    for (entry, prog) in [(0, "xdp_plain"), (2, "xdp_egress_frags")] {
        let mut bad = given.clone();
        bad["ports"][entry]["prog"] = json!(prog);
        let bad: bpfjet_maps::state::MapState = serde_json::from_value(bad).unwrap();
        let fresh = support::kernel_object(std::path::Path::new(&obj), "devmap owner").unwrap();
        assert!(fresh.apply_state(&bad).is_err(), "kernel took {prog}");
        let ours = support::OnEngine::load(std::path::Path::new(&obj), support::Engine::Interp);
        assert!(
            ours.loaded().apply_state(&bad).is_err(),
            "bpfjet took {prog}"
        );
    }
}
