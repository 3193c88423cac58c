//! Multi-buffer (frags) frames against the kernel: `tests/progs/multibuf.c`
//! (compiled here with clang-19) run by `bpfjet test-run` on the
//! interpreter, the JIT and the kernel's BPF_PROG_TEST_RUN, for frame sizes
//! around the linear part's end (3,520 bytes) and the page-sized fragments'
//! borders. The engines must agree on the action, the output bytes (linear
//! part and fragments) and the maps: `bpf_xdp_get_buff_len`,
//! `bpf_xdp_load_bytes`/`store_bytes` across fragment borders and
//! `bpf_xdp_adjust_tail` growing and shrinking across fragments. A frame
//! needing more fragments than the kernel allows is refused by every
//! engine with ENOMEM.

mod support;

use support::{bpfjet, BpfjetRun, Scratch};

/// The kernel's linear part in a test run (page - headroom - shared info).
const LINEAR: usize = 3520;
const PAGE: usize = 4096;
/// The largest test-run frame: the linear part and 17 page fragments.
const MAX_FRAME: usize = LINEAR + 17 * PAGE;

const ENGINES: [&str; 3] = ["interp", "jit", "kernel"];

fn kernel_usable(test: &str) -> bool {
    match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            support::skip(test, &format!("kernel comparison: {why}"));
            false
        }
    }
}

fn object(dir: &Scratch) -> String {
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/progs/multibuf.c"),
    )
    .expect("tests/progs/multibuf.c");
    dir.compile_c("multibuf", &source)
}

/// A `len`-byte frame whose first 12 bytes are the programs' three s32
/// parameters; the rest a pattern that differs from page to page.
fn frame(len: usize, params: [i32; 3]) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ (i / PAGE) as u8)
        .collect();
    for (i, p) in params.iter().enumerate() {
        f[i * 4..i * 4 + 4].copy_from_slice(&p.to_le_bytes());
    }
    f
}

fn run(obj: &str, prog: &str, packet: &str, engine: &str) -> BpfjetRun {
    bpfjet(
        &[
            "test-run",
            obj,
            "--prog",
            prog,
            "--data",
            packet,
            "--engine",
            engine,
            "--json",
            "--dump-maps",
        ],
        b"",
    )
}

/// (retval, data_out, maps) of a successful run.
type Outcome = (u64, String, serde_json::Value);

fn outcome(run: &BpfjetRun, what: &str) -> Outcome {
    assert_eq!(run.code, Some(0), "{what}: {}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON report");
    (
        v["retval"].as_u64().expect("retval"),
        v["data_out"].as_str().expect("data_out").to_string(),
        v["maps"].clone(),
    )
}

/// The `out` map's 64 words.
fn out_words(maps: &serde_json::Value) -> Vec<i64> {
    let entries = maps["out"].as_array().expect("out map");
    let mut words = vec![0i64; 64];
    for e in entries {
        let key = e["key"].as_str().expect("key");
        let value = e["value"].as_str().expect("value");
        let k = u32::from_str_radix(&key[..8], 16)
            .expect("hex key")
            .swap_bytes() as usize;
        let bytes: Vec<u8> = (0..16)
            .step_by(2)
            .map(|i| u8::from_str_radix(&value[i..i + 2], 16).expect("hex"))
            .collect();
        words[k] = i64::from_le_bytes(bytes.try_into().unwrap());
    }
    words
}

/// Runs `prog` on `packet` on every engine (the kernel when usable) and
/// requires the same outcome; returns it.
fn engines_agree(obj: &str, prog: &str, packet: &str, kernel: bool, label: &str) -> Outcome {
    let mut first: Option<(&str, Outcome)> = None;
    for engine in ENGINES {
        if engine == "kernel" && !kernel {
            continue;
        }
        let got = outcome(
            &run(obj, prog, packet, engine),
            &format!("{label} on {engine}"),
        );
        match &first {
            None => first = Some((engine, got)),
            Some((e0, want)) => {
                assert_eq!(want.0, got.0, "{label}: action, {e0} vs {engine}");
                assert_eq!(want.1, got.1, "{label}: output bytes, {e0} vs {engine}");
                assert_eq!(want.2, got.2, "{label}: maps, {e0} vs {engine}");
            }
        }
    }
    first.expect("at least one engine").1
}

/// Frame sizes around the linear end and the first fragment borders.
const SIZES: [usize; 11] = [
    60,
    3000,
    LINEAR - 1,
    LINEAR,
    LINEAR + 1,
    5000,
    LINEAR + PAGE,
    LINEAR + PAGE + 1,
    9000,
    9001,
    MAX_FRAME,
];

#[test]
fn buff_len_and_linear_part_match_the_kernel() {
    let dir = Scratch::new("multibuf-lens");
    let obj = object(&dir);
    let kernel = kernel_usable("multibuf lens");
    for len in SIZES {
        let packet = dir.file(&format!("lens{len}.bin"), frame(len, [0; 3]));
        for prog in ["lens", "lens_plain"] {
            let (action, out, maps) =
                engines_agree(&obj, prog, &packet, kernel, &format!("{prog} {len}"));
            assert_eq!(action, 2);
            assert_eq!(
                out.len(),
                2 * len,
                "{prog} {len}: the whole frame comes back"
            );
            let words = out_words(&maps);
            assert_eq!(words[0], len as i64, "{prog} {len}: buff_len");
            assert_eq!(
                words[1],
                len.min(LINEAR) as i64,
                "{prog} {len}: linear part"
            );
        }
    }
}

#[test]
fn loads_and_stores_across_fragments_match_the_kernel() {
    let dir = Scratch::new("multibuf-copies");
    let obj = object(&dir);
    let kernel = kernel_usable("multibuf copies");
    for len in SIZES {
        let packet = dir.file(&format!("copies{len}.bin"), frame(len, [0; 3]));
        let (action, _, maps) =
            engines_agree(&obj, "copies", &packet, kernel, &format!("copies {len}"));
        assert_eq!(action, 3);
        let words = out_words(&maps);
        // bpf_xdp_pointer: offsets over 0xffff are EFAULT before the end check.
        let past_end = if len - 15 > 0xffff { -14 } else { -22 };
        assert_eq!(words[15], past_end, "copies {len}: a load past the end");
        assert_eq!(
            words[18], -14,
            "copies {len}: an offset over 0xffff is EFAULT"
        );
        let last16 = if len - 16 > 0xffff { -14 } else { 0 };
        assert_eq!(words[12], last16, "copies {len}: the last 16 bytes");
        if len > LINEAR + 8 {
            assert_eq!(words[3], 0, "copies {len}: a load across the linear end");
            assert_eq!(words[21], 0, "copies {len}: a store across the linear end");
        }
        let big_ok = if len >= 6100 { 0 } else { -22 };
        assert_eq!(words[25], big_ok, "copies {len}: the 6000-byte load");
    }
}

/// The adjust cases for a `len`-byte frame: (tail 1, tail 2, head).
fn adjust_cases(len: usize) -> Vec<[i32; 3]> {
    let lin = len.min(LINEAR) as i32;
    let rest = (len - len.min(LINEAR)) as i32;
    let last = if rest == 0 {
        0
    } else {
        (rest - 1) % PAGE as i32 + 1
    };
    let len = len as i32;
    let room = PAGE as i32 - last;
    let mut cases = vec![
        [0, 0, 0],
        [100, -100, 0],
        [-last, 0, 0],         // drops the last fragment exactly
        [-(last + 10), 0, 0],  // and 10 bytes of the one before
        [-rest, 20, 0],        // every fragment, then grows the linear end
        [-(rest + 10), 50, 0], // every fragment and 10 linear bytes
        [-(len - 14), 0, 0],   // down to an Ethernet header
        [-(len - 13), 0, 0],   // one byte short: EINVAL
        [room, 1, 0],          // fills the last page, then one too many
        [room + 1, 0, 0],      // past the last page: EINVAL
        [-1, 0, -20],          // head moves into the headroom
        [10, -5, lin - 14],    // head leaves 14 linear bytes
        [0, 0, lin - 13],      // one too far: EINVAL
        [-4096, 4096, 0],
    ];
    cases.sort();
    cases.dedup();
    cases
}

#[test]
fn adjust_tail_across_fragments_matches_the_kernel() {
    let dir = Scratch::new("multibuf-adjust");
    let obj = object(&dir);
    let kernel = kernel_usable("multibuf adjust");
    for len in [60, LINEAR, LINEAR + 1, 5000, LINEAR + PAGE + 1, 9000] {
        for params in adjust_cases(len) {
            let label = format!("adjust {len} {params:?}");
            let name = format!("adjust{len}_{}_{}_{}.bin", params[0], params[1], params[2]);
            let packet = dir.file(&name, frame(len, params));
            let (action, out, maps) = engines_agree(&obj, "adjust", &packet, kernel, &label);
            assert_eq!(action, 2, "{label}");
            let words = out_words(&maps);
            assert_eq!(
                out.len() as i64,
                2 * words[7],
                "{label}: output is buff_len bytes"
            );
        }
    }
}

#[test]
fn too_many_fragments_is_enomem_everywhere() {
    let dir = Scratch::new("multibuf-enomem");
    let obj = object(&dir);
    let kernel = kernel_usable("multibuf ENOMEM");
    let packet = dir.file("big.bin", frame(MAX_FRAME + 1, [0; 3]));
    for engine in ENGINES {
        if engine == "kernel" && !kernel {
            continue;
        }
        let r = run(&obj, "lens", &packet, engine);
        assert_ne!(
            r.code,
            Some(0),
            "{engine} ran a {}-byte frame",
            MAX_FRAME + 1
        );
        assert!(
            r.stderr.contains("ENOMEM") || r.stderr.contains("Cannot allocate memory"),
            "{engine}: {}",
            r.stderr
        );
    }
}

/// A little-endian microsecond pcap (Ethernet) of `frames`.
fn pcap(frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for word in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 262_144, 1] {
        out.extend_from_slice(&word.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        for word in [i as u32, 0, f.len() as u32, f.len() as u32] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    out
}

/// The records of a pcap written by `bpfjet run --out` (little-endian).
fn pcap_records(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut records = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        records.push(bytes[at + 16..at + 16 + caplen].to_vec());
        at += 16 + caplen;
    }
    records
}

/// The JSON summary `bpfjet run --json` ends with.
fn run_summary(run: &BpfjetRun) -> serde_json::Value {
    let line = run.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}; {}", run.stderr))
}

/// Jumbo pcap records through `bpfjet run`: an `xdp.frags` program gets
/// them as multi-buffer frames and writes exactly what the kernel's test
/// run of the same frame returns; a program without frags gets no such
/// frame (counted as aborted, the reason in the summary).
#[test]
fn jumbo_pcap_records_run_as_multi_buffer_frames() {
    let dir = Scratch::new("multibuf-pcap");
    let obj = object(&dir);
    let kernel = kernel_usable("multibuf pcap");
    let frames: Vec<Vec<u8>> = [
        (60, [10, 0, 0]),
        (LINEAR, [0, 0, 0]),
        (LINEAR + 1, [100, -50, 0]),
        (5000, [-1490, 8, -16]),
        (9000, [-2000, 300, 0]),
        (9000, [-(9000 - 14), 0, 0]),
        (LINEAR + 2 * PAGE, [PAGE as i32, 0, 0]),
    ]
    .iter()
    .map(|&(len, params)| frame(len, params))
    .collect();
    let input = dir.file("in.pcap", pcap(&frames));
    let mut expected = Vec::new();
    if kernel {
        for (i, f) in frames.iter().enumerate() {
            let pkt = dir.file(&format!("rec{i}.bin"), f);
            let (action, out, _) = outcome(&run(&obj, "adjust", &pkt, "kernel"), "kernel");
            assert_eq!(action, 2);
            expected.push(out);
        }
    }
    for engine in ["interp", "jit"] {
        let out_dir = dir.path(&format!("out-{engine}"));
        let r = bpfjet(
            &[
                "run",
                &obj,
                "--prog",
                "adjust",
                "--engine",
                engine,
                "--workers",
                "1",
                "--name",
                &format!("multibuf-{engine}-{}", std::process::id()),
                "--json",
                "--pcap",
                &input,
                "--out",
                &out_dir,
            ],
            b"",
        );
        assert_eq!(r.code, Some(0), "{engine}: {}", r.stderr);
        let s = run_summary(&r);
        assert_eq!(s["actions"]["PASS"], frames.len(), "{engine}: {s}");
        let written = std::fs::read(format!("{out_dir}/pass.pcap")).expect("pass.pcap");
        let records: Vec<String> = pcap_records(&written)
            .iter()
            .map(|r| r.iter().map(|b| format!("{b:02x}")).collect())
            .collect();
        assert_eq!(records.len(), frames.len(), "{engine}");
        for (i, want) in expected.iter().enumerate() {
            assert_eq!(
                &records[i], want,
                "{engine}: record {i} differs from the kernel"
            );
        }
    }
    // lens_plain (section "xdp", no frags): the linear frames run, the
    // longer ones are refused.
    let r = bpfjet(
        &[
            "run",
            &obj,
            "--prog",
            "lens_plain",
            "--engine",
            "interp",
            "--workers",
            "1",
            "--name",
            &format!("multibuf-plain-{}", std::process::id()),
            "--json",
            "--pcap",
            &input,
        ],
        b"",
    );
    let s = run_summary(&r);
    assert_eq!(s["actions"]["PASS"], 2, "{s}");
    assert_eq!(s["actions"]["ABORTED"], frames.len() - 2, "{s}");
    assert!(
        r.stdout.contains("xdp.frags") || r.stderr.contains("xdp.frags"),
        "the reason is reported: {} {}",
        r.stdout,
        r.stderr
    );
}

/// `--linear-size N` (the input context's `data_end`, kernel 6.18): the
/// first min(N, 3520) bytes are linear, the rest fragments, 0 included;
/// N past the packet is EINVAL on every engine.
#[test]
fn linear_size_from_the_context_matches_the_kernel() {
    let dir = Scratch::new("multibuf-linear");
    let obj = object(&dir);
    let kernel = kernel_usable("multibuf linear size");
    for len in [60, 9000] {
        let packet = dir.file(&format!("lin{len}.bin"), frame(len, [100, -30, 0]));
        for linear in [0, 10, 14, 100, 3520, 3600, len] {
            if linear > len {
                continue;
            }
            let n = linear.to_string();
            for prog in ["lens", "copies", "adjust"] {
                let label = format!("{prog} {len} linear {linear}");
                let mut first: Option<Outcome> = None;
                for engine in ENGINES {
                    if engine == "kernel" && !kernel {
                        continue;
                    }
                    let r = bpfjet(
                        &[
                            "test-run",
                            &obj,
                            "--prog",
                            prog,
                            "--data",
                            &packet,
                            "--engine",
                            engine,
                            "--json",
                            "--dump-maps",
                            "--linear-size",
                            &n,
                        ],
                        b"",
                    );
                    let got = outcome(&r, &format!("{label} on {engine}"));
                    if prog == "lens" {
                        let words = out_words(&got.2);
                        assert_eq!(words[1], linear.min(LINEAR) as i64, "{label} on {engine}");
                    }
                    match &first {
                        None => first = Some(got),
                        Some(want) => assert_eq!(want, &got, "{label}: {engine} differs"),
                    }
                }
            }
        }
        let past = (len + 1).to_string();
        for engine in ENGINES {
            if engine == "kernel" && !kernel {
                continue;
            }
            let r = bpfjet(
                &[
                    "test-run",
                    &obj,
                    "--prog",
                    "lens",
                    "--data",
                    &packet,
                    "--engine",
                    engine,
                    "--linear-size",
                    &past,
                ],
                b"",
            );
            assert_ne!(
                r.code,
                Some(0),
                "{engine} accepted a linear part past the packet"
            );
            assert!(
                r.stderr.contains("EINVAL") || r.stderr.contains("Invalid argument"),
                "{engine}: {}",
                r.stderr
            );
        }
    }
}

/// A PROG_ARRAY owned by its first referencing program takes only tail-call
/// targets of the same attach type and frags flag: the kernel's libbpf
/// slot initialiser fails with EINVAL otherwise, and so does bpfjet's load.
#[test]
fn prog_array_mixing_frags_is_refused_like_the_kernel() {
    let dir = Scratch::new("multibuf-compat");
    let kernel = kernel_usable("multibuf prog-array compatibility");
    let source = |target_sec: &str, root_sec: &str| {
        format!(
            "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\
             int target(struct xdp_md *ctx);\n\
             struct {{ __uint(type, BPF_MAP_TYPE_PROG_ARRAY); __uint(max_entries, 2);\n\
                      __type(key, __u32); __array(values, int (void *)); }}\n\
             jmp SEC(\".maps\") = {{ .values = {{ [0] = (void *)&target }} }};\n\
             SEC(\"{target_sec}\") int target(struct xdp_md *ctx) {{ return XDP_PASS; }}\n\
             SEC(\"{root_sec}\") int root(struct xdp_md *ctx) {{\n\
                 bpf_tail_call(ctx, &jmp, 0); return XDP_DROP; }}\n\
             char LICENSE[] SEC(\"license\") = \"GPL\";\n"
        )
    };
    let packet = dir.file("pkt.bin", frame(64, [0; 3]));
    for (i, (target, root, ok)) in [
        ("xdp", "xdp.frags", false),
        ("xdp/devmap", "xdp", false),
        ("xdp.frags", "xdp.frags", true),
        ("xdp", "xdp", true),
    ]
    .into_iter()
    .enumerate()
    {
        let obj = dir.compile_c(&format!("compat{i}"), &source(target, root));
        for engine in ENGINES {
            if engine == "kernel" && !kernel {
                continue;
            }
            let r = bpfjet(
                &[
                    "test-run", &obj, "--prog", "root", "--data", &packet, "--engine", engine,
                ],
                b"",
            );
            let label = format!("{target} in the array of {root} on {engine}");
            if ok {
                assert_eq!(r.code, Some(0), "{label}: {}", r.stderr);
                assert!(r.stdout.contains("PASS"), "{label}: {}", r.stdout);
            } else {
                assert_ne!(r.code, Some(0), "{label} was accepted");
                if engine != "kernel" {
                    assert!(
                        r.stderr
                            .contains("tail calls only between programs of the same type"),
                        "{label}: {}",
                        r.stderr
                    );
                }
            }
        }
    }
}
