//! Property test against the kernel: random frames, mostly mutations of the
//! fixture packets (so they get past the first parsing checks and reach the
//! deeper paths), sent one after the other through each corpus program on
//! the kernel and on bpfjet's interpreter. Each engine keeps its maps across
//! the sequence, so agreement on every frame and on the maps at the end also
//! checks that state built up by earlier frames matches.
//!
//! The frames come from proptest with a fixed seed, so a failure names a
//! reproducible frame (printed in hex).

mod support;

use bpfjet_maps::state::{to_hex, MapState};
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use support::fixtures::{self, Fixture, StateCache};

/// Frames per program.
const FRAMES: usize = 96;

/// BPF_PROG_TEST_RUN's bounds for an XDP frame without frags: an Ethernet
/// header, and well under a page minus the XDP headroom.
const MIN_FRAME: usize = 14;
const MAX_FRAME: usize = 1514;

/// Programs whose verdicts depend on the clock across frames: rate_limiter
/// refills a bucket by the time elapsed since the previous frame of the same
/// source, which two engines running at different instants cannot agree on.
/// Its fixture cases (differential.rs) cover it with the clock neutralised.
const CLOCK_DEPENDENT: &[&str] = &["rate_limiter"];

#[derive(Clone, Debug)]
enum Mutation {
    /// Overwrite byte `at % len` with `value`.
    Set { at: usize, value: u8 },
    /// Cut the frame to `len % current + MIN_FRAME` bytes.
    Truncate { len: usize },
    /// Append bytes.
    Extend { bytes: Vec<u8> },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        6 => (any::<usize>(), any::<u8>()).prop_map(|(at, value)| Mutation::Set { at, value }),
        1 => any::<usize>().prop_map(|len| Mutation::Truncate { len }),
        1 => proptest::collection::vec(any::<u8>(), 1..64).prop_map(|bytes| Mutation::Extend { bytes }),
    ]
}

fn apply(mut frame: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for m in mutations {
        match m {
            Mutation::Set { at, value } => {
                let len = frame.len();
                frame[at % len] = *value;
            }
            Mutation::Truncate { len } => {
                let room = frame.len() - MIN_FRAME + 1;
                frame.truncate(MIN_FRAME + len % room);
            }
            Mutation::Extend { bytes } => frame.extend_from_slice(bytes),
        }
        frame.truncate(MAX_FRAME);
    }
    frame
}

/// A fixture packet with a few mutations (most frames), or random bytes.
fn frame(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    let mutated = (
        proptest::sample::select(seeds),
        proptest::collection::vec(mutation(), 0..4),
    )
        .prop_map(|(seed, ms)| apply(seed, &ms));
    let random = proptest::collection::vec(any::<u8>(), MIN_FRAME..200);
    prop_oneof![9 => mutated, 1 => random]
}

fn frames_for(fixture: &Fixture) -> Vec<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = fixture.cases.iter().map(|c| c.packet.clone()).collect();
    let seed_bytes: [u8; 32] = *b"bpfjet random packets, seed 0001";
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let strategy = frame(seeds);
    (0..FRAMES)
        .map(|_| {
            strategy
                .new_tree(&mut runner)
                .expect("generating a frame")
                .current()
        })
        .collect()
}

/// How many frames ended in each XDP action, to show which paths were reached.
type ActionCounts = std::collections::BTreeMap<u32, usize>;

fn describe(counts: &ActionCounts) -> String {
    const NAMES: [&str; 5] = ["ABORTED", "DROP", "PASS", "TX", "REDIRECT"];
    counts
        .iter()
        .map(|(retval, n)| match NAMES.get(*retval as usize) {
            Some(name) => format!("{name} {n}"),
            None => format!("retval {retval}: {n}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first frame where the engines part ways, or the end-of-run map
/// difference; on agreement, the actions seen.
fn compare_program(fixture: &Fixture, state: &MapState) -> Result<ActionCounts, String> {
    let object = bpfjet_obj::load_file(&fixture.object).map_err(|e| e.to_string())?;
    let kernel = bpfjet_kernel::KernelObject::open_with(
        &fixture.object,
        &bpfjet_kernel::LoadOptions {
            state: Some(state),
            ..Default::default()
        },
    )
    .map_err(|e| format!("kernel load: {e}"))?;
    let bpfjet = LoadedObject::load(
        &object,
        &ObjectOptions {
            ncpus: bpfjet_kernel::possible_cpus(),
            state: Some(state.clone()),
            ..ObjectOptions::default()
        },
    )
    .map_err(|e| format!("bpfjet load: {e}"))?;
    let frames = frames_for(fixture);
    let mut actions = ActionCounts::new();
    for (i, frame) in frames.iter().enumerate() {
        let k = kernel
            .test_run(&fixture.prog, frame, 1, Some(0))
            .map_err(|e| format!("frame {i} ({}): kernel: {e}", to_hex(frame)))?;
        let b = bpfjet
            .test_run(
                &fixture.prog,
                frame,
                &TestRunOptions {
                    repeat: 1,
                    cpu: 0,
                    ingress_ifindex: 0,
                    rx_queue_index: 0,
                    linear_size: None,
                    meta_len: 0,
                },
            )
            .map_err(|e| format!("frame {i} ({}): bpfjet: {e}", to_hex(frame)))?;
        if (k.retval, &k.data_out) != (b.retval, &b.data_out) {
            return Err(format!(
                "frame {i}: {}\n  kernel retval {} data_out {}\n  bpfjet retval {} data_out {}",
                to_hex(frame),
                k.retval,
                to_hex(&k.data_out),
                b.retval,
                to_hex(&b.data_out)
            ));
        }
        *actions.entry(k.retval).or_default() += 1;
    }
    let mut kernel_maps = kernel
        .dump_maps()
        .map_err(|e| format!("kernel dump: {e}"))?;
    let mut bpfjet_maps = bpfjet
        .dump_state()
        .map_err(|e| format!("bpfjet dump: {e}"))?;
    support::time_fields::mask(&fixture.program, &mut kernel_maps);
    support::time_fields::mask(&fixture.program, &mut bpfjet_maps);
    for (name, k) in &kernel_maps {
        if bpfjet_maps.get(name) != Some(k) {
            return Err(format!(
                "after {} frames, map {name} differs (kernel {} entries, bpfjet {:?})",
                frames.len(),
                k.len(),
                bpfjet_maps.get(name).map(Vec::len)
            ));
        }
    }
    if bpfjet_maps.len() != kernel_maps.len() {
        return Err("bpfjet dumps maps the kernel does not".into());
    }
    Ok(actions)
}

#[test]
fn random_frames_match_the_kernel() {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        support::skip("random-packet differential tests", &why);
        return;
    }
    let build = support::corpus_build_dir();
    let states = StateCache::default();
    let mut failures = Vec::new();
    let mut report = String::new();
    for fixture in fixtures::all(&build) {
        if CLOCK_DEPENDENT.contains(&fixture.program.as_str()) {
            support::skip(
                &format!("random frames through {}", fixture.program),
                "its verdicts depend on the time between frames",
            );
            continue;
        }
        // Every case of a fixture so far shares one state; take the first.
        let state = states.get(&fixture.cases[0].state);
        match compare_program(&fixture, &state) {
            Ok(actions) => {
                report += &format!(
                    "{}: {FRAMES} random frames agree ({})\n",
                    fixture.program,
                    describe(&actions)
                )
            }
            Err(why) => {
                report += &format!("{}: FAIL {why}\n", fixture.program);
                failures.push(fixture.program.clone());
            }
        }
    }
    support::announce(&report);
    assert!(
        failures.is_empty(),
        "disagreement in: {}",
        failures.join(", ")
    );
}
