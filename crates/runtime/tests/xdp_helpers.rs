//! Kernel helpers, each compared with the kernel's behaviour: map
//! operations and their error codes, csum_diff, redirects, bpf_loop and
//! for_each_map_elem, strings and printf, context fields (through a spilled
//! context and a subprogram), packet loads and stores.

mod xdp_support;

use bpfjet_maps::state::MapState;
use xdp_support::*;

fn devmap_state() -> MapState {
    serde_json::from_str(
        r#"{"ports": [{"key": "00000000", "value": "01000000"},
                      {"key": "01000000", "value": "01000000"}]}"#,
    )
    .unwrap()
}

#[test]
fn csum_diff_matches_the_kernel() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "csum_diff");
    let mut seed = 0x1234_5678_9abc_def0u64;
    for case in 0..40 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let sizes = [(seed & 0x3c) as i64, ((seed >> 8) & 0x3c) as i64];
        let state = cfg_state(&[sizes[0], sizes[1], (seed >> 16) as i64, (seed >> 40) as i64]);
        ours.apply_state(&state).unwrap();
        if let Some(k) = &kernel {
            k.apply_state(&state).unwrap();
        }
        let pkt: Vec<u8> = (0..64)
            .map(|i| (seed >> (i % 56)) as u8 ^ i as u8)
            .collect();
        let (_, dump) = run_both(
            &ours,
            kernel.as_ref(),
            "csum",
            &pkt,
            0,
            &[],
            &format!("case {case}"),
        );
        let out = out_vals(&dump);
        let _ = out;
    }
    // Sizes that are no multiple of 4, and more than 512 bytes in all.
    let pkt = packet(600);
    run_both(
        &ours,
        kernel.as_ref(),
        "csum",
        &pkt,
        0,
        &[],
        "large and odd sizes",
    );
}

#[test]
fn map_helpers_match_the_kernel() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "map helpers");
    for cpu in [0, 1] {
        let (_, dump) = run_both(
            &ours,
            kernel.as_ref(),
            "maps",
            &packet(64),
            cpu,
            &[],
            "maps",
        );
        let out = out_vals(&dump);
        if cpu == 0 {
            assert_eq!(out[0], -2, "BPF_EXIST on a missing key is ENOENT");
            assert_eq!(out[1], 0);
        }
        assert_eq!(out[2], -17, "BPF_NOEXIST on a present key is EEXIST");
        assert_eq!(out[7], -22, "array elements cannot be deleted");
        assert_eq!(out[14], 0, "NUMA node");
    }
    let dump = ours.dump_state().unwrap();
    assert_eq!(
        dump["pcpu"][0].values.as_ref().unwrap(),
        &vec![
            "0100000000000000".to_string(),
            "0200000000000000".to_string()
        ]
    );
}

#[test]
fn callbacks_match_the_kernel() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "bpf_loop / for_each_map_elem");
    for (stop_at, loops) in [(100, 10), (3, 10), (0, 0), (7, 8)] {
        let state = cfg_state(&[stop_at, loops]);
        ours.apply_state(&state).unwrap();
        if let Some(k) = &kernel {
            k.apply_state(&state).unwrap();
        }
        // The hash map gets entries from the `maps` program first.
        run_both(&ours, kernel.as_ref(), "maps", &packet(64), 0, &[], "fill");
        let (_, dump) = run_both(
            &ours,
            kernel.as_ref(),
            "loops",
            &packet(64),
            0,
            &[],
            "loops",
        );
        let out = out_vals(&dump);
        assert_eq!(out[2], -22, "bpf_loop flags");
        // The kernel inlines bpf_loop calls with constant zero flags, and
        // the inlined form sets E2BIG with a 32-bit move.
        assert_eq!(out[3], 0xffff_fff9, "bpf_loop over BPF_MAX_LOOPS");
        assert_eq!(out[6], 5, "every array element visited");
        assert_eq!(out[9], -22, "for_each flags");
        // A callback deleting the element it is given: every element is
        // still visited once (the map's contents after it are compared
        // with the kernel's by run_both).
        assert_eq!(out[11], out[10], "calls = visits");
        assert!(
            out[11] > 0 && out[12] > 0,
            "visits {} deletes {}",
            out[11],
            out[12]
        );
    }
}

#[test]
fn strings_and_printf() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "strncmp / snprintf");
    let (result, dump) = run_both(
        &ours,
        kernel.as_ref(),
        "strings",
        &packet(64),
        1,
        &[],
        "strings",
    );
    let out = out_vals(&dump);
    assert_eq!(&out[0..3], &[0, 1, 1]);
    let text: Vec<u8> = out[8..12].iter().flat_map(|w| w.to_le_bytes()).collect();
    let expected = b"n=42 m=-0005 s=hello x=2a\0";
    assert_eq!(&text[..expected.len()], expected);
    assert_eq!(out[3], expected.len() as i64);
    assert_eq!(
        out[4],
        expected.len() as i64,
        "snprintf returns the full length"
    );
    assert_eq!(out[5], 0, "truncated output is NUL-terminated");
    assert_eq!(result.trace_log, vec!["pkt len 64 on cpu 1".to_string()]);
    assert_eq!(out[7], "pkt len 64 on cpu 1".len() as i64);
}

#[test]
fn redirects_match_the_kernel() {
    let path = build("helpers");
    let state = devmap_state();
    let ours = load_ours(&path, Some(&state));
    let kernel = load_kernel(&path, Some(&state), "redirects");
    for (key, flags) in [(0, 0), (1, 2), (2, 2), (2, 1), (9, 3), (0, 1 << 3), (0, 64)] {
        let cfg = cfg_state(&[key, flags]);
        ours.apply_state(&cfg).unwrap();
        if let Some(k) = &kernel {
            k.apply_state(&cfg).unwrap();
        }
        let (result, dump) = run_both(
            &ours,
            kernel.as_ref(),
            "redirect",
            &packet(64),
            0,
            &[],
            &format!("redirect_map key {key} flags {flags}"),
        );
        let out = out_vals(&dump);
        assert_eq!(&out[0..8], &[4, 0, 4, 1, 4, 0, 4, 3]);
        let _ = result;
    }
}

#[test]
fn context_fields_and_packet_bytes() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "context fields");
    let (result, dump) = run_both(
        &ours,
        kernel.as_ref(),
        "ctx_fields",
        &packet(64),
        0,
        &[],
        "ctx",
    );
    let out = out_vals(&dump);
    assert_eq!(out[0], 64);
    assert_eq!(out[1], 64, "through a spilled context pointer");
    assert_eq!(out[4], 1, "the loopback device");
    assert_eq!(&out[5..7], &[0, 0]);
    assert_eq!(out[2], 0);
    assert_eq!(out[7], -22, "past the end");
    assert_eq!(out[8], -14, "offsets over 0xffff");
    assert_eq!(&out[9..12], &[0, -22, 64]);
    assert_eq!(result.retval, 3);
    assert_eq!(result.data_out[1], 0x55);
}

/// `bpf_jiffies64`: bpfjet's value, taken between two runs of the same
/// program on the kernel, lies between the kernel's two values (one tick
/// of slack either side for the tick boundary); and with 40 ms between
/// the kernel's first run and bpfjet's, the ticks between their values
/// match the nanoseconds between their `bpf_ktime_get_ns` at the kernel's
/// tick (its own ticks over its own nanoseconds), within two ticks.
#[test]
fn jiffies_match_the_kernel() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let Some(kernel) = load_kernel(&path, None, "jiffies64") else {
        return;
    };
    let kernel_run = || {
        kernel
            .test_run("clocks", &packet(64), 1, Some(0))
            .unwrap_or_else(|e| panic!("kernel test run of clocks: {e}"));
        out_vals(&kernel.dump_maps().expect("kernel dump"))
    };
    for _ in 0..3 {
        let before = kernel_run();
        std::thread::sleep(std::time::Duration::from_millis(40));
        run_ours(&ours, "clocks", &packet(64), 0);
        let mine = out_vals(&ours.dump_state().expect("bpfjet dump"));
        let after = kernel_run();
        assert!(
            before[1] - 1 <= mine[1] && mine[1] <= after[1] + 1,
            "jiffies64: bpfjet {} outside the kernel's {}..{}",
            mine[1],
            before[1],
            after[1]
        );
        // 40 ms is at least 4 ticks at any HZ the kernel has (100..1000).
        let kernel_ticks = after[1] - before[1];
        assert!(
            kernel_ticks >= 4,
            "the kernel's jiffies: {before:?} then {after:?}"
        );
        let tick_ns = (after[0] - before[0]) / kernel_ticks;
        let (ticks, ns) = (mine[1] - before[1], mine[0] - before[0]);
        assert!(
            (ticks * tick_ns - ns).abs() <= 2 * tick_ns,
            "jiffies64: {ticks} ticks in {ns} ns (the kernel's tick {tick_ns} ns)"
        );
    }
}

/// `bpf_get_current_comm` in XDP (a CAP_PERFMON loader's base helper):
/// the calling thread's name, NUL-padded, as the kernel's test run gives.
#[test]
fn current_comm_matches_the_kernel() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "get_current_comm");
    let (_, dump) = run_both(&ours, kernel.as_ref(), "comm", &packet(64), 0, &[], "comm");
    let out = out_vals(&dump);
    assert_eq!(out[2], 0, "bpf_get_current_comm returns 0");
    let name: Vec<u8> = out[0..2].iter().flat_map(|w| w.to_le_bytes()).collect();
    let mut thread = [0u8; 16];
    let own = std::thread::current()
        .name()
        .unwrap_or("")
        .as_bytes()
        .to_vec();
    let n = own.len().min(15);
    thread[..n].copy_from_slice(&own[..n]);
    assert_eq!(name, thread, "the running thread's name");
}

/// A SYN frame: Ethernet, IPv4 or IPv6, TCP with the options `opts`
/// (padded to the header's 4-byte length), 100 bytes of payload room.
fn syn_frame(v6: bool, opts: &[u8], seed: u8) -> Vec<u8> {
    let mut f = vec![0u8; 12];
    f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
    if v6 {
        let mut ip = vec![0u8; 40];
        ip[0] = 0x60;
        ip[6] = 6;
        ip[7] = 64;
        for (i, b) in ip[8..40].iter_mut().enumerate() {
            *b = seed.wrapping_mul(7).wrapping_add(i as u8);
        }
        f.extend_from_slice(&ip);
    } else {
        f.extend_from_slice(&[0x45, 0, 0, 60, 0, 0, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&[10, 0, seed, 1, 192, 168, 1, seed]);
    }
    let mut th = vec![0u8; 20];
    th[0..2].copy_from_slice(&(40000 + u16::from(seed)).to_be_bytes());
    th[2..4].copy_from_slice(&443u16.to_be_bytes());
    th[4..8].copy_from_slice(&(0x1234_5678u32 ^ u32::from(seed) << 8).to_be_bytes());
    th[8..12].copy_from_slice(&0xdead_beefu32.to_be_bytes());
    th[13] = 0x02;
    th.extend_from_slice(opts);
    while !th.len().is_multiple_of(4) {
        th.push(1);
    }
    th[12] = ((th.len() / 4) as u8) << 4;
    f.extend_from_slice(&th);
    f.resize(f.len() + 100, 0);
    f
}

/// The raw SYN-cookie helpers against the kernel's: the MSS each cookie
/// encodes (from the SYN's MSS option, or the default), `-EINVAL` for a
/// wrong header length, `-EACCES` for an acknowledgment that is no
/// cookie, and 0 for the ACK of each one's own cookie (the secrets are
/// each side's, so the cookies themselves differ).
#[test]
fn syncookies_match_the_kernel() {
    let path = build("helpers");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "tcp_raw_*_syncookie");
    let mss = |m: u16| [2, 4, (m >> 8) as u8, m as u8];
    let cases: Vec<(bool, Vec<u8>, i64)> = vec![
        (false, vec![], 536),
        (false, mss(1460).to_vec(), 1460),
        (false, mss(1400).to_vec(), 1300),
        (false, [&[1, 1][..], &mss(9000), &[4, 2]].concat(), 1460),
        (false, mss(100).to_vec(), 536),
        (true, vec![], 1220),
        (true, mss(1440).to_vec(), 1440),
        (true, mss(1430).to_vec(), 1420),
        (true, mss(9000).to_vec(), 8940),
    ];
    for (i, (v6, opts, want)) in cases.iter().enumerate() {
        let frame = syn_frame(*v6, opts, i as u8);
        let label = format!("syncookie case {i}");
        let (_, dump) = run_both(&ours, kernel.as_ref(), "syncookie", &frame, 0, &[], &label);
        let out = out_vals(&dump);
        assert_eq!(out[0], *want, "{label}: the cookie's MSS");
        assert_eq!(out[1], -22, "{label}: a wrong header length");
        assert_eq!(out[2], -13, "{label}: an acknowledgment that is no cookie");
        assert_eq!(out[3], 0, "{label}: the ACK of the cookie");
    }
}
