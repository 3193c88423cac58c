//! Frame adjustments (`bpf_xdp_adjust_head/tail/meta`): limits, error codes,
//! metadata movement and the test run's output, against the kernel.

mod xdp_support;

use xdp_support::*;

const ADJUST_HEAD: i64 = 1;
const ADJUST_TAIL: i64 = 2;
const ADJUST_META: i64 = 3;
const META_THEN_HEAD: i64 = 4;
const HEAD_THEN_TAIL: i64 = 5;

#[test]
fn adjust_limits_match_the_kernel() {
    let path = build("adjust");
    let ours = load_ours(&path, None);
    let kernel = load_kernel(&path, None, "frame adjustments");
    let cases: Vec<(i64, i64, i64, usize)> = vec![
        (ADJUST_HEAD, -216, 0, 60),
        (ADJUST_HEAD, -217, 0, 60),
        (ADJUST_HEAD, -256, 0, 60),
        (ADJUST_HEAD, 46, 0, 60),
        (ADJUST_HEAD, 47, 0, 60),
        (ADJUST_HEAD, 20, 0, 60),
        (ADJUST_TAIL, -46, 0, 60),
        (ADJUST_TAIL, -47, 0, 60),
        (ADJUST_TAIL, 100, 0, 60),
        (ADJUST_TAIL, 3460, 0, 60),
        (ADJUST_TAIL, 3461, 0, 60),
        (ADJUST_TAIL, 1, 0, 3520),
        (ADJUST_META, -4, 0, 60),
        (ADJUST_META, -3, 0, 60),
        (ADJUST_META, 4, 0, 60),
        (ADJUST_META, -32, 0, 60),
        (ADJUST_META, -36, 0, 60),
        (ADJUST_META, -252, 0, 60),
        (ADJUST_META, -212, 0, 60),
        (ADJUST_META, -216, 0, 60),
        (ADJUST_META, -220, 0, 60),
        (META_THEN_HEAD, -8, -16, 60),
        (META_THEN_HEAD, -8, -208, 60),
        (META_THEN_HEAD, -8, -209, 60),
        (META_THEN_HEAD, -8, 30, 60),
        (HEAD_THEN_TAIL, -100, 3560, 60),
        (HEAD_THEN_TAIL, 40, -6, 60),
    ];
    for (op, a, b, len) in cases {
        let state = cfg_state(&[op, a, b]);
        ours.apply_state(&state).unwrap();
        if let Some(k) = &kernel {
            k.apply_state(&state).unwrap();
        }
        let label = format!("op {op} args {a} {b} on {len} bytes");
        let (result, dump) = run_both(
            &ours,
            kernel.as_ref(),
            "adjust",
            &packet(len),
            0,
            &[],
            &label,
        );
        let out = out_vals(&dump);
        assert_eq!(
            out[1] as usize + out[2] as usize,
            result.data_out.len(),
            "{label}"
        );
        assert_eq!(out[3], out[1], "{label}: xdp_get_buff_len");
    }
}

#[test]
fn repeat_runs_on_the_same_frame() {
    let path = build("adjust");
    let ours = load_ours(&path, Some(&cfg_state(&[ADJUST_HEAD, 10])));
    let result = ours
        .test_run(
            "adjust",
            &packet(60),
            &bpfjet_runtime::TestRunOptions {
                repeat: 3,
                ..Default::default()
            },
        )
        .unwrap();
    // Three runs each strip 10 bytes: the kernel does not reset the frame.
    assert_eq!(result.data_out.len(), 30);
    let out = out_vals(&ours.dump_state().unwrap());
    assert_eq!(out[0], 0);
    let kernel = load_kernel(&path, Some(&cfg_state(&[ADJUST_HEAD, 10])), "repeat");
    if let Some(k) = kernel {
        let theirs = k.test_run("adjust", &packet(60), 3, Some(0)).unwrap();
        assert_eq!(theirs.data_out, result.data_out);
    }
}

#[test]
fn bad_packets_are_refused() {
    let path = build("adjust");
    let ours = load_ours(&path, None);
    let opts = bpfjet_runtime::TestRunOptions::default();
    assert!(ours.test_run("adjust", &packet(13), &opts).is_err());
    // Past the linear part the frame is multi-buffer; past 17 page
    // fragments the kernel refuses it (ENOMEM).
    assert!(ours
        .test_run("adjust", &packet(3520 + 17 * 4096 + 1), &opts)
        .is_err());
    assert!(ours
        .test_run("adjust", &packet(3520 + 17 * 4096), &opts)
        .is_ok());
    assert!(ours.test_run("adjust", &packet(3520), &opts).is_ok());
    assert!(ours.test_run("nope", &packet(60), &opts).is_err());
    let bad_queue = bpfjet_runtime::TestRunOptions {
        rx_queue_index: 1,
        ..Default::default()
    };
    assert!(ours.test_run("adjust", &packet(60), &bad_queue).is_err());
    let no_dev = bpfjet_runtime::TestRunOptions {
        ingress_ifindex: 0x7fff_fff0,
        ..Default::default()
    };
    assert!(ours.test_run("adjust", &packet(60), &no_dev).is_err());
    let bad_cpu = bpfjet_runtime::TestRunOptions {
        cpu: 4096,
        ..Default::default()
    };
    assert!(ours.test_run("adjust", &packet(60), &bad_cpu).is_err());
}
