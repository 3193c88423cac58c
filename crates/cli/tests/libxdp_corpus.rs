//! The real-world corpus: every XDP program of the compiled objects Debian's
//! `libxdp1` installs (xdp-tools: xdp-filter's `xdpfilt_*.o`, the
//! multi-program `xdp-dispatcher.o`, `xdpdump_xdp.o`, the AF_XDP default
//! programs `xsk_def_xdp_prog*.o`), unmodified, differential-tested against
//! the kernel:
//!
//! - verdict: bpfjet's verifier and the kernel's (through libbpf) on the
//!   whole object;
//! - for programs both accept, per map state and packet, on bpfjet's
//!   interpreter, its JIT and the kernel's BPF_PROG_TEST_RUN: the action,
//!   the output bytes and every map after the run. A state's packets run
//!   one after another on the same loaded objects on every engine, so
//!   counters (xdp-filter's rule hits, its per-action stats) accumulate
//!   identically and are compared after every packet; the big port-rule
//!   array (65,536 per-CPU slots) only after a state's last packet, which
//!   still sees every write to it.
//!
//! Map states are those the tools' control planes write (layouts from
//! xdp-tools' sources): xdp-filter rules present on the packets'
//! destination side, on their source side, and present with flags that do
//! not match (a UDP rule for a TCP port); the dispatcher's `.rodata`
//! configuration with 0, 1, 3 and 10 programs chained, and one that stops
//! the chain after the second; xdpdump's capture interface; the AF_XDP
//! program's socket refcount.
//!
//! Programs bpfjet's verifier refuses today are listed in [`KNOWN_REFUSED`]
//! and reported as `refused by bpfjet: <reason>`; one that becomes accepted
//! runs as a full differential case at once (and the list should shrink).
//! The test fails for a semantic mismatch on a program both accept, for a
//! verdict the kernel disagrees with outside that list, and for a program
//! of the list the kernel refuses.

mod support;

use bpfjet_jit::{JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::MapState;
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::path::{Path, PathBuf};

/// Programs (object file, program) bpfjet's verifier refuses today, with
/// the reason it gives. Empty: every XDP program of libxdp1 1.3 verifies.
const KNOWN_REFUSED: &[(&str, &str)] = &[];

fn corpus_dir() -> PathBuf {
    std::env::var_os("LIBXDP_BPF_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(format!("/usr/lib/{}-linux-gnu/bpf", std::env::consts::ARCH))
        })
}

// ---- packets -------------------------------------------------------------

const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const SRC_V4: [u8; 4] = [10, 0, 0, 1];
const DST_V4: [u8; 4] = [10, 0, 0, 2];
const SRC_V6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const DST_V6: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const TCP_SRC: u16 = 1234;
const TCP_DST: u16 = 80;
const UDP_SRC: u16 = 5353;
const UDP_DST: u16 = 53;

fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = DST_MAC.to_vec();
    p.extend_from_slice(&SRC_MAC);
    p.extend_from_slice(&ethertype.to_be_bytes());
    p.extend_from_slice(payload);
    p
}

fn ipv4(proto: u8, l4: &[u8]) -> Vec<u8> {
    let total = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0, 1, 0x40, 0, 64, proto, 0, 0]);
    h.extend_from_slice(&SRC_V4);
    h.extend_from_slice(&DST_V4);
    h.extend_from_slice(l4);
    ethernet(0x0800, &h)
}

fn ipv6(next: u8, l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&SRC_V6);
    h.extend_from_slice(&DST_V6);
    h.extend_from_slice(l4);
    ethernet(0x86dd, &h)
}

fn tcp(src: u16, dst: u16) -> Vec<u8> {
    let mut t = src.to_be_bytes().to_vec();
    t.extend_from_slice(&dst.to_be_bytes());
    t.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(b"payload!");
    t
}

fn udp(src: u16, dst: u16) -> Vec<u8> {
    let mut u = src.to_be_bytes().to_vec();
    u.extend_from_slice(&dst.to_be_bytes());
    u.extend_from_slice(&16u16.to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(b"dnsquery");
    u
}

fn arp_request() -> Vec<u8> {
    let mut a = vec![0, 1, 0x08, 0, 6, 4, 0, 1];
    a.extend_from_slice(&SRC_MAC);
    a.extend_from_slice(&SRC_V4);
    a.extend_from_slice(&[0; 6]);
    a.extend_from_slice(&DST_V4);
    ethernet(0x0806, &a)
}

fn neighbour_solicitation() -> Vec<u8> {
    let mut icmp = vec![135, 0, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&DST_V6);
    ipv6(58, &icmp)
}

/// Every packet runs on every state; names for messages.
fn packets() -> Vec<(&'static str, Vec<u8>)> {
    let mut truncated = ipv4(6, &tcp(TCP_SRC, TCP_DST));
    truncated.truncate(14 + 8);
    vec![
        ("ipv4-tcp", ipv4(6, &tcp(TCP_SRC, TCP_DST))),
        ("ipv4-udp", ipv4(17, &udp(UDP_SRC, UDP_DST))),
        ("ipv6-tcp", ipv6(6, &tcp(TCP_SRC, TCP_DST))),
        ("ipv6-udp", ipv6(17, &udp(UDP_SRC, UDP_DST))),
        ("arp-request", arp_request()),
        ("ipv6-neighbour-solicitation", neighbour_solicitation()),
        ("ipv4-truncated", truncated),
        ("unknown-ethertype", ethernet(0x88b5, &[0u8; 46])),
    ]
}

// ---- map states ----------------------------------------------------------

/// xdp-filter's rule flags (`common_kern_user.h`).
const FLAG_SRC: u64 = 1 << 0;
const FLAG_DST: u64 = 1 << 1;
const FLAG_TCP: u64 = 1 << 2;
const FLAG_UDP: u64 = 1 << 3;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A port rule key: the header's big-endian port, zero-extended to u32 as
/// the program loads it.
fn port_key(port: u16) -> String {
    hex(&u32::from(u16::from_ne_bytes(port.to_be_bytes())).to_ne_bytes())
}

fn entry(key: String, flags: u64) -> serde_json::Value {
    serde_json::json!({"key": key, "value": hex(&flags.to_ne_bytes())})
}

/// Which side of the packets xdp-filter's rules name.
#[derive(Clone, Copy)]
enum Side {
    Dst,
    Src,
    /// Rules on the right addresses and ports with the wrong protocol or
    /// direction bits: present, never a hit.
    Mismatched,
}

fn filter_state(maps: &[String], side: Side) -> serde_json::Value {
    let (dir, mac, v4, v6, tcp_port, udp_port) = match side {
        Side::Dst => (FLAG_DST, DST_MAC, DST_V4, DST_V6, TCP_DST, UDP_DST),
        Side::Src => (FLAG_SRC, SRC_MAC, SRC_V4, SRC_V6, TCP_SRC, UDP_SRC),
        Side::Mismatched => (0, DST_MAC, DST_V4, DST_V6, TCP_DST, UDP_DST),
    };
    let (tcp_flags, udp_flags, addr_flags) = match side {
        // A UDP rule on the TCP port, a TCP rule on the UDP port, and the
        // source bit on the destination addresses.
        Side::Mismatched => (FLAG_DST | FLAG_UDP, FLAG_DST | FLAG_TCP, FLAG_SRC),
        _ => (dir | FLAG_TCP, dir | FLAG_UDP, dir),
    };
    let mut state = serde_json::Map::new();
    for map in maps {
        let entries = match map.as_str() {
            "filter_ports" => vec![
                entry(port_key(tcp_port), tcp_flags),
                entry(port_key(udp_port), udp_flags),
            ],
            "filter_ipv4" => vec![entry(hex(&v4), addr_flags)],
            "filter_ipv6" => vec![entry(hex(&v6), addr_flags)],
            "filter_ethernet" => vec![entry(hex(&mac), addr_flags)],
            _ => continue,
        };
        state.insert(map.clone(), serde_json::Value::Array(entries));
    }
    serde_json::Value::Object(state)
}

/// xdp-dispatcher's `struct xdp_dispatcher_config` (libxdp 1.3): magic,
/// version, num_progs_enabled, is_xdp_frags, then chain_call_actions[10],
/// run_prios[10], program_flags[10].
fn dispatcher_state(enabled: u8, chain: [u32; 10]) -> serde_json::Value {
    let mut conf = vec![236, 2, enabled, 0];
    for c in chain {
        conf.extend_from_slice(&c.to_ne_bytes());
    }
    for prio in 0..10u32 {
        conf.extend_from_slice(&(prio * 10).to_ne_bytes());
    }
    conf.extend_from_slice(&[0; 40]);
    serde_json::json!({".rodata": [{"key": "00000000", "value": hex(&conf)}]})
}

/// The states a control plane gives the object, by name.
fn states(object: &str, maps: &[String]) -> Vec<(String, serde_json::Value)> {
    let empty = serde_json::json!({});
    if object.starts_with("xdpfilt_") {
        return vec![
            ("no rules".into(), empty),
            (
                "rules on destinations".into(),
                filter_state(maps, Side::Dst),
            ),
            ("rules on sources".into(), filter_state(maps, Side::Src)),
            (
                "rules with other flags".into(),
                filter_state(maps, Side::Mismatched),
            ),
        ];
    }
    match object {
        "xdp-dispatcher.o" => {
            // XDP_DISPATCHER_RETVAL (31) continues the chain, XDP_PASS stops it.
            let go_on = (1 << 31) | (1 << 2);
            let mut stop_second = [go_on; 10];
            stop_second[1] = 1 << 2;
            vec![
                ("0 programs".into(), dispatcher_state(0, [go_on; 10])),
                ("1 program".into(), dispatcher_state(1, [go_on; 10])),
                ("3 programs".into(), dispatcher_state(3, [go_on; 10])),
                ("10 programs".into(), dispatcher_state(10, [go_on; 10])),
                (
                    "3 programs, chain stops after the 2nd".into(),
                    dispatcher_state(3, stop_second),
                ),
            ]
        }
        "xdpdump_xdp.o" => {
            // trace_configuration {capture_if_ifindex, capture_snaplen,
            // capture_prog_index}: test-run frames arrive on loopback (1).
            let cfg = |ifindex: u32, snaplen: u32| {
                let mut v = ifindex.to_ne_bytes().to_vec();
                v.extend_from_slice(&snaplen.to_ne_bytes());
                v.extend_from_slice(&0u32.to_ne_bytes());
                serde_json::json!({".data": [{"key": "00000000", "value": hex(&v)}]})
            };
            vec![
                ("other interface".into(), cfg(7, 0)),
                ("capturing loopback, snaplen 32".into(), cfg(1, 32)),
                ("capturing loopback, snaplen 4096".into(), cfg(1, 4096)),
            ]
        }
        o if o.starts_with("xsk_def_xdp_prog") => {
            let refcnt = |n: u32| serde_json::json!({".data": [{"key": "00000000", "value": hex(&n.to_ne_bytes())}]});
            vec![
                ("no socket".into(), refcnt(0)),
                ("one socket, none on this queue".into(), refcnt(1)),
            ]
        }
        _ => vec![("as compiled".into(), empty)],
    }
}

// ---- engines -------------------------------------------------------------

struct Observed {
    retval: u32,
    data_out: Vec<u8>,
    maps: MapState,
}

fn run_options() -> TestRunOptions {
    TestRunOptions {
        repeat: 1,
        cpu: 0,
        ingress_ifindex: 0,
        rx_queue_index: 0,
        linear_size: None,
        meta_len: 0,
    }
}

fn load_bpfjet(object: &bpfjet_obj::Object, state: &MapState) -> Result<LoadedObject, String> {
    LoadedObject::load(
        object,
        &ObjectOptions {
            ncpus: bpfjet_kernel::possible_cpus(),
            state: Some(state.clone()),
            ..ObjectOptions::default()
        },
    )
    .map_err(|e| e.to_string())
}

/// Arrays with more entries than this are dumped after a state's last packet only.
const BIG_ARRAY_ENTRIES: u32 = 4096;

fn dump_bpfjet(loaded: &LoadedObject, keep: &dyn Fn(&str) -> bool) -> MapState {
    loaded.dump_state_where(keep).expect("bpfjet map dump")
}

/// The kernel's verdict on the object, and the loaded object.
fn load_kernel(path: &Path, state: &MapState) -> Result<bpfjet_kernel::KernelObject, String> {
    bpfjet_kernel::KernelObject::open_with(
        path,
        &bpfjet_kernel::LoadOptions {
            state: Some(state),
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())
}

/// One line of the report per (object, program).
struct Report {
    lines: Vec<String>,
    failures: Vec<String>,
    differential: usize,
    refused: usize,
    runs: usize,
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn check_object(path: &Path, report: &mut Report, kernel: bool) {
    let file = path
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .to_string();
    let object = match bpfjet_obj::load_file(path) {
        Ok(o) => o,
        Err(e) => {
            report
                .failures
                .push(format!("{file}: bpfjet cannot read it: {e}"));
            return;
        }
    };
    let map_names: Vec<String> = object.maps.iter().map(|m| m.name.clone()).collect();
    let big: Vec<String> = object
        .maps
        .iter()
        .filter(|m| m.max_entries > BIG_ARRAY_ENTRIES)
        .map(|m| m.name.clone())
        .collect();
    let xdp: Vec<String> = object
        .programs
        .iter()
        .filter(|p| p.kind.is_xdp())
        .map(|p| p.name.clone())
        .collect();
    for p in object.programs.iter().filter(|p| !p.kind.is_xdp()) {
        report.lines.push(format!(
            "{file} {}: not XDP ({}, section {}), not run",
            p.name, p.kind, p.section
        ));
    }
    if xdp.is_empty() {
        return;
    }
    for (state_name, state_json) in states(&file, &map_names) {
        let state: MapState =
            serde_json::from_value(state_json).expect("a state in the STATE.json format");
        let ours = load_bpfjet(&object, &state);
        let theirs = kernel.then(|| load_kernel(path, &state));
        let known = |prog: &str| KNOWN_REFUSED.iter().any(|(o, p)| *o == file && *p == prog);
        let (interp, jit, kobj) = match (ours, theirs) {
            (Ok(loaded), Some(Ok(k))) => {
                let jit = JitObject::new(
                    load_bpfjet(&object, &state).expect("loaded once already"),
                    &JitOptions::default(),
                );
                (loaded, jit, Some(k))
            }
            (Ok(loaded), None) => {
                let jit = JitObject::new(
                    load_bpfjet(&object, &state).expect("loaded once already"),
                    &JitOptions::default(),
                );
                (loaded, jit, None)
            }
            (Err(why), kernel_verdict) => {
                let all_known = xdp.iter().all(|p| known(p));
                match kernel_verdict {
                    Some(Err(kwhy)) => report.lines.push(format!(
                        "{file} [{state_name}]: refused by both (bpfjet: {}; kernel: {})",
                        first_line(&why),
                        first_line(&kwhy)
                    )),
                    _ if all_known => {
                        report.refused += 1;
                        report.lines.push(format!(
                            "{file} [{state_name}]: refused by bpfjet: {}",
                            first_line(&why)
                        ));
                    }
                    _ => report.failures.push(format!(
                        "{file} [{state_name}]: bpfjet refuses what the kernel accepts \
                         (not in KNOWN_REFUSED): {why}"
                    )),
                }
                continue;
            }
            (Ok(_), Some(Err(kwhy))) => {
                report.failures.push(format!(
                    "{file} [{state_name}]: the kernel refuses what bpfjet accepts: {kwhy}"
                ));
                continue;
            }
        };
        for prog in &xdp {
            if known(prog) {
                report.lines.push(format!(
                    "{file} {prog}: accepted now although in KNOWN_REFUSED: \
                     running it as a full case (remove it from the list)"
                ));
            }
            let all = packets();
            for (n, (packet_name, packet)) in all.iter().enumerate() {
                let last = n + 1 == all.len();
                let keep = |name: &str| last || !big.iter().any(|b| b == name);
                report.runs += 1;
                let what = format!("{file} {prog} [{state_name}] {packet_name}");
                let i = interp
                    .test_run(prog, packet, &run_options())
                    .map(|r| Observed {
                        retval: r.retval,
                        data_out: r.data_out,
                        maps: dump_bpfjet(&interp, &keep),
                    });
                let j = jit
                    .test_run(prog, packet, &run_options(), XdpEngine::Jit)
                    .map(|r| Observed {
                        retval: r.retval,
                        data_out: r.data_out,
                        maps: dump_bpfjet(jit.loaded(), &keep),
                    });
                let (i, j) = match (i, j) {
                    (Ok(i), Ok(j)) => (i, j),
                    (i, j) => {
                        report.failures.push(format!(
                            "{what}: run failed: interp {:?} jit {:?}",
                            i.err().map(|e| e.to_string()),
                            j.err().map(|e| e.to_string())
                        ));
                        continue;
                    }
                };
                compare(&mut report.failures, &what, "jit", &j, &i);
                if let Some(k) = &kobj {
                    match k.test_run(prog, packet, 1, Some(0)) {
                        Ok(r) => {
                            let kernel = Observed {
                                retval: r.retval,
                                data_out: r.data_out,
                                maps: k.dump_maps_where(keep).expect("kernel map dump"),
                            };
                            compare(&mut report.failures, &what, "kernel", &kernel, &i);
                        }
                        Err(e) => report.failures.push(format!("{what}: kernel run: {e}")),
                    }
                }
            }
        }
        report.differential += 1;
        report.lines.push(format!(
            "{file} [{state_name}]: {} accepted by both, {} packets compared{}",
            xdp.join(", "),
            packets().len(),
            if kernel { "" } else { " (bpfjet engines only)" }
        ));
    }
}

fn compare(
    failures: &mut Vec<String>,
    what: &str,
    engine: &str,
    got: &Observed,
    interp: &Observed,
) {
    if got.retval != interp.retval {
        failures.push(format!(
            "{what}: {engine} returned {}, bpfjet's interpreter {}",
            got.retval, interp.retval
        ));
    }
    if got.data_out != interp.data_out {
        failures.push(format!(
            "{what}: {engine} output bytes differ from the interpreter's"
        ));
    }
    if got.maps != interp.maps {
        let names: Vec<&String> = got
            .maps
            .keys()
            .chain(interp.maps.keys())
            .filter(|n| got.maps.get(*n) != interp.maps.get(*n))
            .collect();
        failures.push(format!("{what}: {engine} maps differ: {names:?}"));
    }
}

#[test]
fn libxdp_objects_against_the_kernel() {
    let dir = corpus_dir();
    let mut objects: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "o"))
            .collect(),
        Err(e) => {
            support::skip(
                "libxdp corpus",
                &format!("{}: {e} (scripts/setup.sh installs libxdp1)", dir.display()),
            );
            return;
        }
    };
    objects.sort();
    assert!(!objects.is_empty(), "no objects in {}", dir.display());
    let kernel = match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            support::skip("libxdp corpus against the kernel", &why);
            false
        }
    };
    let mut report = Report {
        lines: Vec::new(),
        failures: Vec::new(),
        differential: 0,
        refused: 0,
        runs: 0,
    };
    for path in &objects {
        check_object(path, &mut report, kernel);
    }
    support::announce(&report.lines.join("\n"));
    support::announce(&format!(
        "libxdp corpus: {} objects, {} (object, state) differential cases, {} packet runs, \
         {} refused by bpfjet (known), {} failures",
        objects.len(),
        report.differential,
        report.runs,
        report.refused,
        report.failures.len()
    ));
    assert!(report.failures.is_empty(), "{}", report.failures.join("\n"));
}
