//! The run loop with fixed-verdict programs and with corpus programs on the
//! runtime: counts per action and per redirect target, output files,
//! in-place and staged frames, and a map change taking effect mid-run.

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use bpfjet_io::pcap::SplitOptions;
use bpfjet_io::run::{
    run_worker, FnProgram, FrameMut, NullOutput, ProgramFault, RedirectTarget, RunStats,
    SplitOutput, Verdict, WorkerOptions, WorkerPool, WorkerSetup,
};
use bpfjet_io::{Generator, OutputRoute, PacketBatch, PacketSource, PcapReader, PcapSplitSink};
use bpfjet_maps::state::{load_state, parse_hex};
use bpfjet_runtime::worker::XdpRunnerFactory;
use bpfjet_runtime::{LoadedObject, MemoryMode, ObjectOptions};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn corpus_object(name: &str) -> PathBuf {
    let path = workspace().join(format!("build/examples/xdp/{name}.o"));
    if !path.exists() {
        let status = std::process::Command::new("make")
            .args(["-s", "-C"])
            .arg(workspace().join("examples"))
            .status()
            .expect("run make -C examples");
        assert!(status.success(), "make -C examples failed");
    }
    path
}

fn load(name: &str, state: Option<&Path>) -> LoadedObject {
    let obj = bpfjet_obj::load_file(corpus_object(name)).expect("parse object");
    let state = state.map(|p| load_state(p).expect("state"));
    LoadedObject::load(
        &obj,
        &ObjectOptions {
            ncpus: 2,
            state,
            ..ObjectOptions::default()
        },
    )
    .expect("load")
}

fn fixture(path: &str) -> PathBuf {
    workspace().join("examples/xdp/fixtures").join(path)
}

/// Drop every third packet, transmit the rest, and redirect packets whose
/// IPv4 source address is odd to ifindex 7.
fn pattern_program() -> FnProgram<impl FnMut(&mut FrameMut<'_>) -> Result<Verdict, ProgramFault>> {
    let mut n = 0u64;
    FnProgram(move |f: &mut FrameMut<'_>| {
        n += 1;
        if n.is_multiple_of(3) {
            return Ok(Verdict::DROP);
        }
        // The last byte of the IPv4 source address.
        if f.buf[f.data_start + 29] & 1 == 1 {
            return Ok(Verdict::redirect(RedirectTarget::Ifindex(7)));
        }
        Ok(Verdict::TX)
    })
}

#[test]
fn counts_every_action_and_redirect_target() {
    let mut gen = Generator::from_spec_str("flows=4,count=1000,seed=3").unwrap();
    let stats = RunStats::new(1);
    let stop = AtomicBool::new(false);
    let (report, result) = run_worker(
        &mut gen,
        &mut pattern_program(),
        &mut NullOutput,
        stats.worker(0),
        &stop,
        &WorkerOptions::default(),
    );
    result.unwrap();
    assert_eq!(report.packets, 1000);
    assert_eq!(report.action(OutputRoute::Drop), 333);
    let redirected = report.action(OutputRoute::Redirect);
    assert!(redirected > 0);
    assert_eq!(report.action(OutputRoute::Tx) + redirected, 667);
    assert_eq!(
        report
            .redirect_targets
            .get(&RedirectTarget::Ifindex(7))
            .copied()
            .unwrap_or(0),
        redirected
    );
    let live = stats.snapshot();
    assert_eq!(live.packets, 1000);
    assert_eq!(live.actions, report.actions);
}

#[test]
fn faults_count_as_aborted_and_the_loop_goes_on() {
    let mut gen = Generator::from_spec_str("count=100").unwrap();
    let mut n = 0;
    let mut prog = FnProgram(move |_: &mut FrameMut<'_>| {
        n += 1;
        if n == 10 {
            Err(ProgramFault("out of bounds at pc 3".into()))
        } else {
            Ok(Verdict::PASS)
        }
    });
    let stats = RunStats::new(1);
    let (report, result) = run_worker(
        &mut gen,
        &mut prog,
        &mut NullOutput,
        stats.worker(0),
        &AtomicBool::new(false),
        &WorkerOptions::default(),
    );
    result.unwrap();
    assert_eq!(report.action(OutputRoute::Aborted), 1);
    assert_eq!(report.action(OutputRoute::Pass), 99);
    assert_eq!(report.faults, 1);
    assert_eq!(report.first_fault.as_deref(), Some("out of bounds at pc 3"));
}

#[test]
fn split_output_files_by_action_and_target() {
    let tmp = common::TempDir::new("run-split");
    let dir = tmp.path().to_path_buf();
    let sink = PcapSplitSink::create(
        &dir,
        SplitOptions {
            per_redirect_target: true,
            ..SplitOptions::default()
        },
    )
    .unwrap();
    let mut output = SplitOutput::new(sink);
    let mut gen = Generator::from_spec_str("flows=8,count=300").unwrap();
    let (report, result) = run_worker(
        &mut gen,
        &mut pattern_program(),
        &mut output,
        RunStats::new(1).worker(0),
        &AtomicBool::new(false),
        &WorkerOptions::default(),
    );
    result.unwrap();
    let count = |file: &str| {
        let mut r = PcapReader::open(dir.join(file)).unwrap();
        let mut batch = PacketBatch::new();
        let mut n = 0;
        while r.next_batch(&mut batch).unwrap() > 0 {
            n += batch.len() as u64;
        }
        n
    };
    assert!(report.action(OutputRoute::Redirect) > 0);
    assert_eq!(count("tx.pcap"), report.action(OutputRoute::Tx));
    assert_eq!(
        count("redirect-if7.pcap"),
        report.action(OutputRoute::Redirect)
    );
    assert_eq!(count("pass.pcap"), 0);
    assert!(!dir.join("drop.pcap").exists());
}

#[test]
fn a_pool_stops_on_the_flag_with_unbounded_sources() {
    let stop = Arc::new(AtomicBool::new(false));
    let setups = (0..2)
        .map(|i| WorkerSetup {
            source: Box::new(
                Generator::from_spec_str(&format!("count=unbounded,seed={i}")).unwrap(),
            ) as Box<dyn PacketSource + Send>,
            program: Box::new(FnProgram(|_: &mut FrameMut<'_>| Ok(Verdict::DROP))),
            output: Box::new(NullOutput),
            pin_cpu: None,
            options: WorkerOptions::default(),
        })
        .collect();
    let pool = WorkerPool::spawn(setups, Arc::clone(&stop)).unwrap();
    while pool.stats().snapshot().packets < 10_000 {
        std::thread::yield_now();
    }
    pool.stop();
    let outcome = pool.join();
    assert!(outcome.errors.is_empty(), "{:?}", outcome.errors);
    assert_eq!(outcome.workers.len(), 2);
    assert!(outcome.total.packets >= 10_000);
    assert_eq!(
        outcome.total.action(OutputRoute::Drop),
        outcome.total.packets
    );
}

#[test]
fn firewall_in_place_and_a_live_map_update() {
    let loaded = load("firewall", Some(&fixture("firewall/state.json")));
    let factory = XdpRunnerFactory::new(&loaded, "firewall", MemoryMode::BoundsChecked).unwrap();
    assert!(
        !factory.stages_frames(),
        "the firewall needs no frame helper"
    );
    let mut runner = factory.runner(1, 0, 0, None, None).unwrap();
    // 10.66.0.0/16 is blocked by the fixture state.
    let spec = "proto=udp,src=10.66.0.0/16,dst=10.0.0.1:53,flows=64,count=640";
    let stats = RunStats::new(1);
    let stop = AtomicBool::new(false);
    let mut gen = Generator::from_spec_str(spec).unwrap();
    let (report, result) = run_worker(
        &mut gen,
        &mut runner,
        &mut NullOutput,
        stats.worker(0),
        &stop,
        &WorkerOptions::default(),
    );
    result.unwrap();
    assert_eq!(report.action(OutputRoute::Drop), 640, "{report:?}");

    // A control plane removes the rule: the same traffic passes.
    let blocked = loaded.map("blocked_v4").unwrap();
    blocked
        .delete_elem(&parse_hex("10000000 0a420000").unwrap())
        .unwrap();
    let mut gen = Generator::from_spec_str(spec).unwrap();
    let (report, result) = run_worker(
        &mut gen,
        &mut runner,
        &mut NullOutput,
        stats.worker(0),
        &stop,
        &WorkerOptions::default(),
    );
    result.unwrap();
    assert_eq!(report.action(OutputRoute::Pass), 640, "{report:?}");

    // Per-CPU accounting went to the runner's slot (1) only.
    let verdicts = loaded.map("verdicts").unwrap();
    let per_cpu = verdicts.lookup_percpu(&2u32.to_ne_bytes()).unwrap();
    let packets = |v: &Vec<u8>| u64::from_ne_bytes(v[..8].try_into().unwrap());
    assert_eq!(packets(&per_cpu[0]), 0);
    assert_eq!(packets(&per_cpu[1]), 640);
}

#[test]
fn katran_encapsulates_through_the_staged_frame() {
    let state = workspace().join("build/examples/xdp/fixtures/katran_lb/state.json");
    if !state.exists() {
        corpus_object("katran_lb");
    }
    let loaded = load("katran_lb", Some(&state));
    let factory = XdpRunnerFactory::new(&loaded, "katran_lb", MemoryMode::BoundsChecked).unwrap();
    assert!(factory.stages_frames(), "katran calls bpf_xdp_adjust_head");
    let mut runner = factory.runner(0, 0, 0, None, None).unwrap();
    let tmp = common::TempDir::new("run-katran");
    let dir = tmp.path().to_path_buf();
    let mut output =
        SplitOutput::new(PcapSplitSink::create(&dir, SplitOptions::default()).unwrap());
    let mut gen =
        Generator::from_spec_str("proto=tcp,dst=10.200.1.1:80,flows=100,size=64,count=500")
            .unwrap();
    let (report, result) = run_worker(
        &mut gen,
        &mut runner,
        &mut output,
        RunStats::new(1).worker(0),
        &AtomicBool::new(false),
        &WorkerOptions::default(),
    );
    result.unwrap();
    assert_eq!(report.action(OutputRoute::Tx), 500, "{report:?}");
    let mut r = PcapReader::open(dir.join("tx.pcap")).unwrap();
    let mut batch = PacketBatch::new();
    r.next_batch(&mut batch).unwrap();
    for pkt in batch.packets() {
        // 64-byte frame + a 20-byte outer IPv4 header.
        assert_eq!(pkt.len(), 84);
        assert_eq!(pkt.data()[23], 4, "outer protocol is IPIP");
    }
}
