//! Differential tests: every corpus program × every fixture case, run on the
//! kernel (`BPF_PROG_TEST_RUN`, the oracle) and on bpfjet's interpreter with
//! the same object, map state, packet, CPU and repeat count. They must agree
//! on the return value, the output frame and every map afterwards.
//!
//! Only values that are nondeterministic by nature are exempt, and only
//! field by field: see [`TIME_FIELDS`]. Even there, "was a time written"
//! (zero or not) is still compared.
//!
//! Without a usable kernel (not root) the comparison cannot happen: the
//! test says so on stderr (`SKIPPED: differential tests: ...`) and still
//! checks bpfjet's actions and output frames against the fixtures'
//! kernel-confirmed `expected_action` / `expected_out`.

mod support;

use bpfjet_maps::state::{EntryState, MapState};
use std::collections::BTreeSet;
use std::ops::Range;
use support::fixtures::{self, Case, Fixture, StateCache};

/// A value field written from `bpf_ktime_get_ns()`: the kernel and bpfjet
/// read the clock at different instants, so the bytes cannot agree.
struct TimeField {
    program: &'static str,
    map: &'static str,
    /// The field is in the entries of the map's inner maps (map-in-map).
    inner: bool,
    /// Byte range of the field within the value.
    bytes: Range<usize>,
}

const TIME_FIELDS: &[TimeField] = &[
    // struct real_pos_lru { u32 pos; u32 pad; u64 atime; }: atime is stamped
    // for UDP flows (katran_lb.c, pick_real), in the per-CPU LRU ...
    TimeField {
        program: "katran_lb",
        map: "lru_mapping",
        inner: true,
        bytes: 8..16,
    },
    // ... and in the shared LRU used by CPUs without a per-CPU table.
    TimeField {
        program: "katran_lb",
        map: "fallback_cache",
        inner: false,
        bytes: 8..16,
    },
    // struct bucket { u64 tokens; u64 last_ns; }: last_ns is the creation or
    // refill time (rate_limiter.c). Tokens only depend on elapsed time for
    // refills, which the fixtures avoid by presetting last_ns = 2^64-1.
    TimeField {
        program: "rate_limiter",
        map: "buckets",
        inner: false,
        bytes: 8..16,
    },
];

/// katran_lb keeps a connection table per CPU (the outer index of
/// lru_mapping is the CPU): its cases run as CPU 0 and as CPU 1.
fn cpus_for(program: &str) -> &'static [usize] {
    match program {
        "katran_lb" => &[0, 1],
        _ => &[0],
    }
}

/// What one engine did with one case.
struct Observed {
    retval: u32,
    data_out: Vec<u8>,
    maps: MapState,
}

fn run_kernel(fixture: &Fixture, case: &Case, state: &MapState, cpu: usize) -> Result<Observed, String> {
    let t0 = std::time::Instant::now();
    let object = bpfjet_kernel::KernelObject::open_with(
        &fixture.object,
        &bpfjet_kernel::LoadOptions {
            state: Some(state),
            ..Default::default()
        },
    )
    .map_err(|e| format!("kernel load: {e}"))?;
    let t_load = std::time::Instant::now();
    support::announce(&format!("TIMING load {:?}", t_load - t0));
    let run = object
        .test_run(&fixture.prog, &case.packet, case.repeat, Some(cpu))
        .map_err(|e| format!("kernel test run: {e}"))?;
    let t_run = std::time::Instant::now();
    let maps = object.dump_maps().map_err(|e| format!("kernel dump: {e}"))?;
    support::announce(&format!("TIMING {} run {:?} dump {:?}", case.name, t_run - t_load, t_run.elapsed()));
    Ok(Observed {
        retval: run.retval,
        data_out: run.data_out,
        maps,
    })
}

fn run_bpfjet(
    _object: &bpfjet_obj::Object,
    fixture: &Fixture,
    case: &Case,
    state: &MapState,
    cpu: usize,
) -> Result<Observed, String> {
    run_kernel(fixture, case, state, cpu)
}

fn action(retval: u32) -> String {
    match retval {
        0 => "ABORTED".into(),
        1 => "DROP".into(),
        2 => "PASS".into(),
        3 => "TX".into(),
        4 => "REDIRECT".into(),
        n => format!("UNKNOWN({n})"),
    }
}

/// Replace every time field's bytes by whether a time was written at all.
fn mask_time_fields(program: &str, maps: &MapState) -> MapState {
    let mut maps = maps.clone();
    for field in TIME_FIELDS.iter().filter(|f| f.program == program) {
        let Some(entries) = maps.get_mut(field.map) else {
            continue;
        };
        for entry in entries.iter_mut() {
            if field.inner {
                if let Some(inner) = &mut entry.inner {
                    inner
                        .entries
                        .iter_mut()
                        .for_each(|e| mask_entry(e, &field.bytes));
                }
            } else {
                mask_entry(entry, &field.bytes);
            }
        }
    }
    maps
}

fn mask_entry(entry: &mut EntryState, bytes: &Range<usize>) {
    let mask = |hex: &mut String| {
        // Dumps are lowercase hex without spaces: byte i is at 2i..2i+2.
        let digits = 2 * bytes.start..(2 * bytes.end).min(hex.len());
        if digits.start >= digits.end {
            return;
        }
        let written = hex[digits.clone()].bytes().any(|d| d != b'0');
        hex.replace_range(digits, if written { "<time>" } else { "<zero>" });
    };
    if let Some(v) = &mut entry.value {
        mask(v);
    }
    if let Some(vs) = &mut entry.values {
        vs.iter_mut().for_each(mask);
    }
}

/// The first few differences between two dumps, one per line.
fn describe_map_diff(kernel: &MapState, bpfjet: &MapState) -> Vec<String> {
    let mut out = Vec::new();
    let names: BTreeSet<&String> = kernel.keys().chain(bpfjet.keys()).collect();
    for name in names {
        match (kernel.get(name), bpfjet.get(name)) {
            (Some(_), None) => out.push(format!("map {name}: missing from bpfjet's dump")),
            (None, Some(_)) => out.push(format!("map {name}: only in bpfjet's dump")),
            (Some(k), Some(b)) if k != b => {
                if k.len() != b.len() {
                    out.push(format!(
                        "map {name}: kernel has {} entries, bpfjet {}",
                        k.len(),
                        b.len()
                    ));
                }
                for (ke, be) in k.iter().zip(b.iter()).filter(|(ke, be)| ke != be).take(3) {
                    out.push(format!(
                        "map {name}: kernel {} / bpfjet {}",
                        entry_text(ke),
                        entry_text(be)
                    ));
                }
            }
            _ => {}
        }
    }
    out.truncate(8);
    out
}

fn entry_text(e: &EntryState) -> String {
    serde_json::to_string(e).unwrap_or_default()
}

/// One row of the summary table.
struct Row {
    program: String,
    case: String,
    cpu: usize,
    kernel_action: String,
    bpfjet_action: String,
    data_out_equal: String,
    maps_equal: String,
    problems: Vec<String>,
}

fn yes_no(equal: bool) -> String {
    if equal { "yes" } else { "NO" }.to_string()
}

/// Run one case on both engines (or only bpfjet when the kernel is
/// unusable) and judge it.
fn check_case(
    fixture: &Fixture,
    object: &bpfjet_obj::Object,
    case: &Case,
    state: &MapState,
    cpu: usize,
    with_kernel: bool,
) -> Row {
    let mut row = Row {
        program: fixture.program.clone(),
        case: case.name.clone(),
        cpu,
        kernel_action: "-".into(),
        bpfjet_action: "-".into(),
        data_out_equal: "-".into(),
        maps_equal: "-".into(),
        problems: Vec::new(),
    };
    let bpfjet = run_bpfjet(object, fixture, case, state, cpu);
    let kernel = with_kernel.then(|| run_kernel(fixture, case, state, cpu));

    if let Ok(b) = &bpfjet {
        row.bpfjet_action = action(b.retval);
    }
    if let Some(Ok(k)) = &kernel {
        row.kernel_action = action(k.retval);
    }
    match (&bpfjet, &kernel) {
        (Err(e), _) => row.problems.push(e.clone()),
        (_, Some(Err(e))) => row.problems.push(e.clone()),
        (Ok(b), Some(Ok(k))) => {
            if b.retval != k.retval {
                row.problems
                    .push(format!("retval: kernel {}, bpfjet {}", k.retval, b.retval));
            }
            row.data_out_equal = yes_no(b.data_out == k.data_out);
            if b.data_out != k.data_out {
                row.problems.push(format!(
                    "data_out: kernel {}, bpfjet {}",
                    bpfjet_maps::state::to_hex(&k.data_out),
                    bpfjet_maps::state::to_hex(&b.data_out)
                ));
            }
            let (km, bm) = (
                mask_time_fields(&fixture.program, &k.maps),
                mask_time_fields(&fixture.program, &b.maps),
            );
            row.maps_equal = yes_no(km == bm);
            row.problems.extend(describe_map_diff(&km, &bm));
            // The fixtures were confirmed on the kernel; if the kernel
            // disagrees now, the corpus or the kernel changed.
            if action(k.retval) != case.expected_action {
                row.problems.push(format!(
                    "kernel gave {}, cases.json expects {}",
                    action(k.retval),
                    case.expected_action
                ));
            }
        }
        (Ok(b), None) => {
            // No oracle: the kernel-confirmed fixture expectations instead.
            if let Some(out) = &case.expected_out {
                row.data_out_equal = yes_no(&b.data_out == out);
                if &b.data_out != out {
                    row.problems
                        .push("data_out differs from expected_out".to_string());
                }
            }
            if action(b.retval) != case.expected_action {
                row.problems.push(format!(
                    "bpfjet gave {}, cases.json expects {}",
                    action(b.retval),
                    case.expected_action
                ));
            }
        }
    }
    row
}

fn print_table(rows: &[Row]) {
    let header = [
        "program", "case", "cpu", "kernel", "bpfjet", "data_out=", "maps=", "result",
    ];
    let cells: Vec<[String; 8]> = rows
        .iter()
        .map(|r| {
            [
                r.program.clone(),
                r.case.clone(),
                r.cpu.to_string(),
                r.kernel_action.clone(),
                r.bpfjet_action.clone(),
                r.data_out_equal.clone(),
                r.maps_equal.clone(),
                if r.problems.is_empty() { "ok" } else { "FAIL" }.to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &cells {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let line = |cols: &[String]| {
        cols.iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut text = line(&header.map(String::from));
    text.push('\n');
    for row in &cells {
        text += &line(row);
        text.push('\n');
    }
    for r in rows.iter().filter(|r| !r.problems.is_empty()) {
        text += &format!("\n{} / {} / cpu {}:\n", r.program, r.case, r.cpu);
        for p in &r.problems {
            text += &format!("  {p}\n");
        }
    }
    let failed = rows.iter().filter(|r| !r.problems.is_empty()).count();
    text += &format!("{} passed, {failed} failed", rows.len() - failed);
    support::announce(&text);
}

#[test]
fn corpus_matches_the_kernel() {
    let build = support::corpus_build_dir();
    let with_kernel = match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            support::skip(
                "differential tests",
                &format!(
                    "{why}; checking bpfjet against the fixtures' expected actions only"
                ),
            );
            false
        }
    };
    let cpus = bpfjet_kernel::possible_cpus();
    let states = StateCache::default();
    let mut rows = Vec::new();
    for fixture in fixtures::all(&build) {
        let object = bpfjet_obj::load_file(&fixture.object)
            .unwrap_or_else(|e| panic!("{}: {e}", fixture.object.display()));
        for &cpu in cpus_for(&fixture.program) {
            if cpu >= cpus {
                support::skip(
                    &format!("{} as CPU {cpu}", fixture.program),
                    &format!("this machine has {cpus} possible CPUs"),
                );
                continue;
            }
            for case in &fixture.cases {
                let state = states.get(&case.state);
                rows.push(check_case(&fixture, &object, case, &state, cpu, with_kernel));
            }
        }
    }
    print_table(&rows);
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.problems.is_empty())
        .map(|r| format!("{}/{}/cpu{}", r.program, r.case, r.cpu))
        .collect();
    assert!(failed.is_empty(), "{} cases failed: {}", failed.len(), failed.join(", "));
}
