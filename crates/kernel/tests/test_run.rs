//! Loading objects and running them with BPF_PROG_TEST_RUN: verdicts,
//! packet rewrites, packet growth, contexts and verifier rejections.

mod common;

use bpfjet_kernel::{KernelError, KernelObject, TestRunOptions, XdpContext};
use common::{object, packet};

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;

#[test]
fn fixed_verdicts() {
    require_kernel!("fixed_verdicts");
    let obj = KernelObject::open(object("actions")).unwrap();
    let pass = obj.test_run("xdp_pass", &packet(), 1, None).unwrap();
    assert_eq!(pass.retval, XDP_PASS);
    assert_eq!(
        pass.data_out,
        packet(),
        "an untouched packet comes back as it went in"
    );
    assert_eq!(
        obj.test_run("xdp_drop", &packet(), 1, None).unwrap().retval,
        XDP_DROP
    );
}

#[test]
fn rewritten_bytes_come_back() {
    require_kernel!("rewritten_bytes_come_back");
    let obj = KernelObject::open(object("actions")).unwrap();
    let input = packet();
    let run = obj.test_run("swap_macs", &input, 1, None).unwrap();
    assert_eq!(run.retval, XDP_TX);
    let mut expected = input.clone();
    expected[0..6].copy_from_slice(&input[6..12]);
    expected[6..12].copy_from_slice(&input[0..6]);
    assert_eq!(run.data_out, expected);
}

#[test]
fn repeat_reports_time_per_run() {
    require_kernel!("repeat_reports_time_per_run");
    let obj = KernelObject::open(object("actions")).unwrap();
    let run = obj.test_run("xdp_pass", &packet(), 1000, None).unwrap();
    assert_eq!(run.retval, XDP_PASS);
    // An empty program is far below a microsecond per run on any machine
    // with a JIT; a total (not per run) figure would be ~1000x larger.
    assert!(run.duration_ns < 100_000, "duration {} ns", run.duration_ns);
}

#[test]
fn head_growth_prepends_bytes() {
    require_kernel!("head_growth_prepends_bytes");
    let obj = KernelObject::open(object("resize")).unwrap();
    let input = packet();
    let run = obj.test_run("grow_head", &input, 1, None).unwrap();
    assert_eq!(run.retval, XDP_TX);
    assert_eq!(run.data_out.len(), input.len() + 16);
    assert_eq!(&run.data_out[..16], &[0xee; 16]);
    assert_eq!(&run.data_out[16..], &input[..]);
}

#[test]
fn tail_growth_and_shrink_change_the_length() {
    require_kernel!("tail_growth_and_shrink_change_the_length");
    let obj = KernelObject::open(object("resize")).unwrap();
    let input = packet();
    let grown = obj.test_run("grow_tail", &input, 1, None).unwrap();
    assert_eq!(grown.retval, XDP_TX);
    assert_eq!(grown.data_out.len(), input.len() + 32);
    assert_eq!(&grown.data_out[..input.len()], &input[..]);
    assert_eq!(*grown.data_out.last().unwrap(), 0x5a);

    let shrunk = obj.test_run("shrink_tail", &input, 1, None).unwrap();
    assert_eq!(shrunk.data_out, input[..input.len() - 4]);
}

#[test]
fn xdp_context_reaches_the_program() {
    require_kernel!("xdp_context_reaches_the_program");
    let obj = KernelObject::open(object("actions")).unwrap();
    let options = TestRunOptions {
        repeat: 1,
        cpu: None,
        // lo: ifindex 1 always exists and has receive queue 0.
        xdp_context: Some(XdpContext {
            ingress_ifindex: 1,
            rx_queue_index: 0,
            data_end: None,
        }),
    };
    let run = obj.test_run_with("rx_queue", &packet(), &options).unwrap();
    assert_eq!(run.retval, 100);
}

#[test]
fn verifier_rejection_carries_the_log() {
    require_kernel!("verifier_rejection_carries_the_log");
    let err = KernelObject::open(object("rejected")).unwrap_err();
    let log = err.verifier_log().expect("a verifier log").to_string();
    assert!(log.contains("invalid access to packet"), "log: {log}");
    match &err {
        KernelError::Load { program, .. } => {
            assert_eq!(program.as_deref(), Some("unchecked_read"))
        }
        other => panic!("expected a load error, got {other:?}"),
    }
    let message = err.to_string();
    assert!(message.contains("unchecked_read") && message.contains("invalid access to packet"));
}

#[test]
fn accepted_programs_keep_their_log_on_request() {
    require_kernel!("accepted_programs_keep_their_log_on_request");
    let options = bpfjet_kernel::LoadOptions {
        verifier_log_level: 2,
        ..Default::default()
    };
    let obj = KernelObject::open_with(object("actions"), &options).unwrap();
    let log = obj
        .verifier_log("swap_macs")
        .expect("log of an accepted program");
    assert!(log.contains("processed"), "log: {log}");
}

#[test]
fn unknown_program_is_named() {
    require_kernel!("unknown_program_is_named");
    let obj = KernelObject::open(object("actions")).unwrap();
    let err = obj.test_run("nope", &packet(), 1, None).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("nope") && message.contains("xdp_pass"),
        "{message}"
    );
}

#[test]
fn too_short_packet_is_an_errno() {
    require_kernel!("too_short_packet_is_an_errno");
    let obj = KernelObject::open(object("actions")).unwrap();
    // The kernel wants at least an Ethernet header.
    let err = obj.test_run("xdp_pass", &[0u8; 4], 1, None).unwrap_err();
    assert_eq!(err.errno(), Some(libc::EINVAL), "{err}");
    assert!(err.to_string().contains("xdp_pass"));
}
