//! Differential tests: every corpus program × every fixture case, run on the
//! kernel (`BPF_PROG_TEST_RUN`, the oracle) and on bpfjet's interpreter with
//! the same object, map state, packet, CPU and repeat count. They must agree
//! on the return value, the output frame and every map afterwards.
//!
//! Only values that are nondeterministic by nature are exempt, and only
//! field by field: see `support/time_fields.rs`. Even there, "was a time written"
//! (zero or not) is still compared.
//!
//! Without a usable kernel (not root) the comparison cannot happen: the
//! test says so on stderr (`SKIPPED: differential tests: ...`) and still
//! checks bpfjet's actions and output frames against the fixtures'
//! kernel-confirmed `expected_action` / `expected_out`.

mod support;

use bpfjet_maps::state::{EntryState, MapState};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use support::fixtures::{self, Case, Fixture, StateCache};

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

fn run_kernel(
    fixture: &Fixture,
    case: &Case,
    state: &MapState,
    cpu: usize,
) -> Result<Observed, String> {
    let object = bpfjet_kernel::KernelObject::open_with(
        &fixture.object,
        &bpfjet_kernel::LoadOptions {
            state: Some(state),
            ..Default::default()
        },
    )
    .map_err(|e| format!("kernel load: {e}"))?;
    let run = object
        .test_run(&fixture.prog, &case.packet, case.repeat, Some(cpu))
        .map_err(|e| format!("kernel test run: {e}"))?;
    let maps = object
        .dump_maps()
        .map_err(|e| format!("kernel dump: {e}"))?;
    Ok(Observed {
        retval: run.retval,
        data_out: run.data_out,
        maps,
    })
}

fn run_bpfjet(
    object: &bpfjet_obj::Object,
    fixture: &Fixture,
    case: &Case,
    state: &MapState,
    cpu: usize,
    dump: bool,
) -> Result<Observed, String> {
    let loaded = LoadedObject::load(
        object,
        &ObjectOptions {
            // The kernel dumps one slot per possible CPU; so must bpfjet.
            ncpus: bpfjet_kernel::possible_cpus(),
            state: Some(state.clone()),
            ..ObjectOptions::default()
        },
    )
    .map_err(|e| format!("bpfjet load: {e}"))?;
    let run = loaded
        .test_run(
            &fixture.prog,
            &case.packet,
            &TestRunOptions {
                repeat: case.repeat,
                cpu,
                // No context, as on the kernel side: loopback, queue 0.
                ingress_ifindex: 0,
                rx_queue_index: 0,
            },
        )
        .map_err(|e| format!("bpfjet test run: {e}"))?;
    // Without the kernel there is nothing to compare a dump with.
    let maps = if dump {
        loaded
            .dump_state()
            .map_err(|e| format!("bpfjet dump: {e}"))?
    } else {
        MapState::new()
    };
    Ok(Observed {
        retval: run.retval,
        data_out: run.data_out,
        maps,
    })
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
    let mut bpfjet = run_bpfjet(object, fixture, case, state, cpu, with_kernel);
    let mut kernel = with_kernel.then(|| run_kernel(fixture, case, state, cpu));

    if let Ok(b) = &bpfjet {
        row.bpfjet_action = action(b.retval);
    }
    if let Some(Ok(k)) = &kernel {
        row.kernel_action = action(k.retval);
    }
    match (&mut bpfjet, &mut kernel) {
        (Err(e), _) => row.problems.push(e.clone()),
        (_, Some(Err(e))) => row.problems.push(e.clone()),
        (Ok(b), Some(Ok(k))) => {
            let (k, b) = (&mut *k, &mut *b);
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
            support::time_fields::mask(&fixture.program, &mut k.maps);
            support::time_fields::mask(&fixture.program, &mut b.maps);
            row.maps_equal = yes_no(k.maps == b.maps);
            if k.maps != b.maps {
                row.problems.extend(describe_map_diff(&k.maps, &b.maps));
            }
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
        "program",
        "case",
        "cpu",
        "kernel",
        "bpfjet",
        "data_out=",
        "maps=",
        "result",
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

/// One case on one CPU.
struct Job<'a> {
    fixture: &'a Fixture,
    object: &'a bpfjet_obj::Object,
    case: &'a Case,
    cpu: usize,
}

/// Run the jobs on a few threads (katran's full dumps take seconds each),
/// keeping the rows in job order. A panic in an engine is a failed case,
/// not a lost table.
fn run_jobs(jobs: &[Job<'_>], states: &StateCache, with_kernel: bool) -> Vec<Row> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let next = AtomicUsize::new(0);
    let rows: Mutex<Vec<Option<Row>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let state = states.get(&job.case.state);
                let row = panic::catch_unwind(AssertUnwindSafe(|| {
                    check_case(
                        job.fixture,
                        job.object,
                        job.case,
                        &state,
                        job.cpu,
                        with_kernel,
                    )
                }))
                .unwrap_or_else(|payload| {
                    let why = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Row {
                        program: job.fixture.program.clone(),
                        case: job.case.name.clone(),
                        cpu: job.cpu,
                        kernel_action: "-".into(),
                        bpfjet_action: "-".into(),
                        data_out_equal: "-".into(),
                        maps_equal: "-".into(),
                        problems: vec![format!("panicked: {why}")],
                    }
                });
                rows.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(row);
            });
        }
    });
    rows.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every job produced a row"))
        .collect()
}

#[test]
fn corpus_matches_the_kernel() {
    let build = support::corpus_build_dir();
    let with_kernel = match bpfjet_kernel::kernel_available() {
        Ok(()) => true,
        Err(why) => {
            support::skip(
                "differential tests",
                &format!("{why}; checking bpfjet against the fixtures' expected actions only"),
            );
            false
        }
    };
    let cpus = bpfjet_kernel::possible_cpus();
    let fixtures = fixtures::all(&build);
    let objects: Vec<bpfjet_obj::Object> = fixtures
        .iter()
        .map(|f| {
            bpfjet_obj::load_file(&f.object)
                .unwrap_or_else(|e| panic!("{}: {e}", f.object.display()))
        })
        .collect();
    let mut jobs = Vec::new();
    for (fixture, object) in fixtures.iter().zip(&objects) {
        for &cpu in cpus_for(&fixture.program) {
            if cpu >= cpus {
                support::skip(
                    &format!("{} as CPU {cpu}", fixture.program),
                    &format!("this machine has {cpus} possible CPUs"),
                );
                continue;
            }
            jobs.extend(fixture.cases.iter().map(|case| Job {
                fixture,
                object,
                case,
                cpu,
            }));
        }
    }
    let rows = run_jobs(&jobs, &StateCache::default(), with_kernel);
    print_table(&rows);
    let failed: Vec<String> = rows
        .iter()
        .filter(|r| !r.problems.is_empty())
        .map(|r| format!("{}/{}/cpu{}", r.program, r.case, r.cpu))
        .collect();
    assert!(
        failed.is_empty(),
        "{} cases failed: {}",
        failed.len(),
        failed.join(", ")
    );
}

/// The masks must hide only the clock bytes of the listed maps: anything
/// else that differs still fails the comparison.
#[test]
fn time_masks_hide_only_clock_bytes() {
    let dump = |pos: &str, atime: &str, other: &str| -> MapState {
        serde_json::from_str(&format!(
            r#"{{"fallback_cache": [{{"key": "01", "value": "{pos}00000000{atime}"}}],
                "reals": [{{"key": "00000000", "value": "{other}"}}]}}"#
        ))
        .unwrap()
    };
    let masked = |mut m: MapState| {
        support::time_fields::mask("katran_lb", &mut m);
        m
    };
    let kernel = masked(dump("04000000", "30f4734ec7030000", "0a000101"));
    // Another clock reading: equal after masking.
    assert!(kernel == masked(dump("04000000", "a7f49443cb030000", "0a000101")));
    // No time written where the kernel wrote one: different.
    assert!(kernel != masked(dump("04000000", "0000000000000000", "0a000101")));
    // Bytes outside the time field, or maps without masks: different.
    assert!(kernel != masked(dump("05000000", "30f4734ec7030000", "0a000101")));
    assert!(kernel != masked(dump("04000000", "30f4734ec7030000", "0a000102")));
    // Masks belong to their program only.
    let mut other_program = dump("04000000", "30f4734ec7030000", "0a000101");
    support::time_fields::mask("firewall", &mut other_program);
    assert!(other_program != kernel);
}
