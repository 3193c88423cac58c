//! Differential tests: every corpus program × every fixture case, run on the
//! kernel (`BPF_PROG_TEST_RUN`, the oracle) and on bpfjet's interpreter with
//! the same object, map state, packet, CPU and repeat count. They must agree
//! on the return value, the output frame and every map afterwards. Cases
//! with an `expected_out` must also produce exactly that frame.
//!
//! Only values that are nondeterministic by nature are exempt, and only
//! field by field: see `support/time_fields.rs`. Even there, "was a time written"
//! (zero or not) is still compared.
//!
//! # Fresh loads and sequences
//!
//! Small programs get a fresh load of both engines for every case: each case
//! starts from its STATE.json, and the full map dumps are compared after it.
//!
//! Programs with a big array (more than [`BIG_ARRAY_ENTRIES`] entries:
//! katran's 2.1M-entry `ch_rings`) would spend minutes reloading and
//! re-dumping it for every case. Their cases run instead as a **sequence**,
//! one per CPU (and per STATE.json file): each engine is loaded once with the
//! state, then the cases run one after the other on the same loaded objects.
//! Both engines see the identical sequence, so their maps stay comparable
//! case by case:
//!
//! - action and output frame: compared after every case, as for fresh loads;
//! - maps: after every case, every map except the big arrays (`maps=`
//!   column `yes*`); after the last case of the sequence, every map, big
//!   arrays included (`yes`). A write to a big array by any case survives to
//!   that final dump, so no map byte goes uncompared.
//!
//! The fixtures' `expected_action` was confirmed on a fresh load; a sequence
//! case still compares the kernel's action with it, so a case whose action
//! depended on state left by the previous ones would show up as a failure.
//!
//! Without a usable kernel (not root) the comparison cannot happen: the
//! test says so on stderr (`SKIPPED: differential tests: ...`) and still
//! checks bpfjet's actions and output frames against the fixtures'
//! kernel-confirmed `expected_action` / `expected_out`.

mod support;

use bpfjet_maps::state::{EntryState, MapState};
use bpfjet_maps::MapType;
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
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

/// Arrays with more entries than this make a program run its cases as a
/// sequence (see the header), and are dumped only after the last case.
const BIG_ARRAY_ENTRIES: u32 = 65_536;

/// The object's big arrays (empty for the small programs).
fn big_arrays(object: &bpfjet_obj::Object) -> BTreeSet<String> {
    object
        .maps
        .iter()
        .filter(|m| matches!(m.map_type, MapType::Array | MapType::PercpuArray))
        .filter(|m| m.max_entries > BIG_ARRAY_ENTRIES)
        .map(|m| m.name.clone())
        .collect()
}

/// What one engine did with one case.
struct Observed {
    retval: u32,
    data_out: Vec<u8>,
    maps: MapState,
}

/// Which maps to dump after a case.
#[derive(Clone, Copy)]
enum Dump<'a> {
    /// None (no kernel to compare with).
    Nothing,
    /// Every map but these (the big arrays, mid-sequence).
    AllBut(&'a BTreeSet<String>),
}

impl Dump<'_> {
    fn keep(self, name: &str) -> bool {
        match self {
            Dump::Nothing => false,
            Dump::AllBut(skip) => !skip.contains(name),
        }
    }
}

fn load_kernel(fixture: &Fixture, state: &MapState) -> Result<bpfjet_kernel::KernelObject, String> {
    bpfjet_kernel::KernelObject::open_with(
        &fixture.object,
        &bpfjet_kernel::LoadOptions {
            state: Some(state),
            ..Default::default()
        },
    )
    .map_err(|e| format!("kernel load: {e}"))
}

fn run_kernel(
    object: &bpfjet_kernel::KernelObject,
    fixture: &Fixture,
    case: &Case,
    cpu: usize,
    dump: Dump<'_>,
) -> Result<Observed, String> {
    let run = object
        .test_run(&fixture.prog, &case.packet, case.repeat, Some(cpu))
        .map_err(|e| format!("kernel test run: {e}"))?;
    let maps = object
        .dump_maps_where(|name| dump.keep(name))
        .map_err(|e| format!("kernel dump: {e}"))?;
    Ok(Observed {
        retval: run.retval,
        data_out: run.data_out,
        maps,
    })
}

fn load_bpfjet(object: &bpfjet_obj::Object, state: &MapState) -> Result<LoadedObject, String> {
    LoadedObject::load(
        object,
        &ObjectOptions {
            // The kernel dumps one slot per possible CPU; so must bpfjet.
            ncpus: bpfjet_kernel::possible_cpus(),
            state: Some(state.clone()),
            ..ObjectOptions::default()
        },
    )
    .map_err(|e| format!("bpfjet load: {e}"))
}

fn run_bpfjet(
    loaded: &LoadedObject,
    fixture: &Fixture,
    case: &Case,
    cpu: usize,
    dump: Dump<'_>,
) -> Result<Observed, String> {
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
                linear_size: None,
                meta_len: 0,
            },
        )
        .map_err(|e| format!("bpfjet test run: {e}"))?;
    let maps = loaded
        .dump_state_where(|name| dump.keep(name))
        .map_err(|e| format!("bpfjet dump: {e}"))?;
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

/// Judge what both engines (or only bpfjet, when the kernel is unusable)
/// did with one case. `partial`: the dumps left out the big arrays.
fn judge(
    fixture: &Fixture,
    case: &Case,
    cpu: usize,
    mut bpfjet: Result<Observed, String>,
    mut kernel: Option<Result<Observed, String>>,
    partial: bool,
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
            if partial {
                row.maps_equal.push('*');
            }
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
            if let Some(out) = &case.expected_out {
                if &k.data_out != out {
                    row.problems.push(format!(
                        "kernel data_out differs from expected_out {}",
                        bpfjet_maps::state::to_hex(out)
                    ));
                }
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

/// One case on fresh loads of both engines.
fn check_case(
    fixture: &Fixture,
    object: &bpfjet_obj::Object,
    case: &Case,
    state: &MapState,
    cpu: usize,
    with_kernel: bool,
) -> Row {
    let none = BTreeSet::new();
    let dump = if with_kernel {
        Dump::AllBut(&none)
    } else {
        // Without the kernel there is nothing to compare a dump with.
        Dump::Nothing
    };
    let bpfjet = load_bpfjet(object, state).and_then(|l| run_bpfjet(&l, fixture, case, cpu, dump));
    let kernel = with_kernel.then(|| {
        load_kernel(fixture, state).and_then(|k| run_kernel(&k, fixture, case, cpu, dump))
    });
    judge(fixture, case, cpu, bpfjet, kernel, false)
}

/// Cases run one after the other on one load of each engine (see the
/// header): small maps compared after every case, all maps after the last.
fn check_sequence(
    fixture: &Fixture,
    object: &bpfjet_obj::Object,
    cases: &[&Case],
    state: &MapState,
    cpu: usize,
    with_kernel: bool,
    big: &BTreeSet<String>,
) -> Vec<Row> {
    let none = BTreeSet::new();
    let bpfjet = load_bpfjet(object, state);
    let kernel = with_kernel.then(|| load_kernel(fixture, state));
    let mut rows = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        let last = i + 1 == cases.len();
        let dump = match (with_kernel, last) {
            (false, _) => Dump::Nothing,
            (true, true) => Dump::AllBut(&none),
            (true, false) => Dump::AllBut(big),
        };
        let b = match &bpfjet {
            Ok(l) => run_bpfjet(l, fixture, case, cpu, dump),
            Err(e) => Err(e.clone()),
        };
        let k = kernel.as_ref().map(|k| match k {
            Ok(k) => run_kernel(k, fixture, case, cpu, dump),
            Err(e) => Err(e.clone()),
        });
        rows.push(judge(fixture, case, cpu, b, k, !last && !big.is_empty()));
    }
    rows
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
    if rows.iter().any(|r| r.maps_equal.ends_with('*')) {
        text += "* every map but the big arrays; all maps after the sequence's last case\n";
    }
    let failed = rows.iter().filter(|r| !r.problems.is_empty()).count();
    text += &format!("{} passed, {failed} failed", rows.len() - failed);
    support::announce(&text);
}

/// Work for one thread: one case on fresh loads, or a sequence of cases on
/// one load (programs with big arrays).
struct Job<'a> {
    fixture: &'a Fixture,
    object: &'a bpfjet_obj::Object,
    /// One case, or the cases of a sequence (all with the same state file).
    cases: Vec<&'a Case>,
    cpu: usize,
    /// The object's big arrays; non-empty means "run as a sequence".
    big: BTreeSet<String>,
}

impl Job<'_> {
    fn state(&self) -> &Path {
        &self.cases[0].state
    }

    fn run(&self, state: &MapState, with_kernel: bool) -> Vec<Row> {
        if self.big.is_empty() {
            self.cases
                .iter()
                .map(|case| {
                    check_case(
                        self.fixture,
                        self.object,
                        case,
                        state,
                        self.cpu,
                        with_kernel,
                    )
                })
                .collect()
        } else {
            check_sequence(
                self.fixture,
                self.object,
                &self.cases,
                state,
                self.cpu,
                with_kernel,
                &self.big,
            )
        }
    }

    /// Rows for every case of the job when it panicked.
    fn panicked(&self, why: &str) -> Vec<Row> {
        self.cases
            .iter()
            .map(|case| Row {
                program: self.fixture.program.clone(),
                case: case.name.clone(),
                cpu: self.cpu,
                kernel_action: "-".into(),
                bpfjet_action: "-".into(),
                data_out_equal: "-".into(),
                maps_equal: "-".into(),
                problems: vec![format!("panicked: {why}")],
            })
            .collect()
    }
}

/// Run the jobs on a few threads, keeping the rows in job order. A panic in
/// an engine fails the job's cases, not the table.
fn run_jobs(jobs: &[Job<'_>], states: &StateCache, with_kernel: bool) -> Vec<Row> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let next = AtomicUsize::new(0);
    let rows: Mutex<Vec<Option<Vec<Row>>>> = Mutex::new(jobs.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let state = states.get(job.state());
                let job_rows =
                    panic::catch_unwind(AssertUnwindSafe(|| job.run(&state, with_kernel)))
                        .unwrap_or_else(|payload| {
                            let why = payload
                                .downcast_ref::<String>()
                                .cloned()
                                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default();
                            job.panicked(&why)
                        });
                rows.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(job_rows);
            });
        }
    });
    rows.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .flat_map(|r| r.expect("every job produced its rows"))
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
            let big = big_arrays(object);
            if big.is_empty() {
                jobs.extend(fixture.cases.iter().map(|case| Job {
                    fixture,
                    object,
                    cases: vec![case],
                    cpu,
                    big: BTreeSet::new(),
                }));
                continue;
            }
            // One sequence per state file, cases in fixture order.
            let mut sequences: Vec<Vec<&Case>> = Vec::new();
            for case in &fixture.cases {
                match sequences.iter_mut().find(|s| s[0].state == case.state) {
                    Some(sequence) => sequence.push(case),
                    None => sequences.push(vec![case]),
                }
            }
            jobs.extend(sequences.into_iter().map(|cases| Job {
                fixture,
                object,
                cases,
                cpu,
                big: big.clone(),
            }));
        }
    }
    // The long sequences first, so the short cases fill in around them.
    jobs.sort_by_key(|job| job.big.is_empty());
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
