//! Tail calls through a PROG_ARRAY: the 33-call limit, attempts on empty
//! slots not counting against it (as in the kernel), execution continuing
//! after a failed call, and the static `.values` initialiser of the corpus.

mod xdp_support;

use bpfjet_maps::state::MapState;
use xdp_support::*;

fn jmp_state(slot0: &str) -> MapState {
    serde_json::from_str(&format!(
        r#"{{"jmp": [{{"key": "00000000", "prog": "{slot0}"}},
                    {{"key": "01000000", "prog": "other"}}]}}"#
    ))
    .unwrap()
}

fn bss(dump: &MapState) -> (u64, u64) {
    let hex = dump[".bss"][0].value.as_deref().unwrap();
    let b = bpfjet_maps::state::parse_hex(hex).unwrap();
    (
        u64::from_le_bytes(b[0..8].try_into().unwrap()),
        u64::from_le_bytes(b[8..16].try_into().unwrap()),
    )
}

#[test]
fn self_tail_call_stops_after_33() {
    let path = build("tailcall");
    let mut state = jmp_state("chain");
    state.extend(cfg_state(&[0, 0]));
    let ours = load_ours(&path, Some(&state));
    let kernel = load_kernel(&path, Some(&state), "tail-call limit");
    let (result, dump) = run_both(
        &ours,
        kernel.as_ref(),
        "chain",
        &packet(64),
        0,
        &[],
        "chain",
    );
    assert_eq!(result.retval, 1, "the 34th run falls through to XDP_DROP");
    assert_eq!(bss(&dump), (34, 0));
    assert_eq!(dump["jmp"][0].prog.as_deref(), Some("chain"));
}

#[test]
fn empty_slot_attempts_count_against_the_limit() {
    let path = build("tailcall");
    let mut state = jmp_state("chain");
    state.extend(cfg_state(&[0, 5]));
    let ours = load_ours(&path, Some(&state));
    let kernel = load_kernel(&path, Some(&state), "tail-call miss counting");
    let (_, dump) = run_both(
        &ours,
        kernel.as_ref(),
        "chain",
        &packet(64),
        0,
        &[],
        "misses",
    );
    let (runs, misses) = bss(&dump);
    // Attempts on an empty slot do not use up the limit.
    assert_eq!(runs, 34);
    assert_eq!(misses, 34 * 5);
}

#[test]
fn tail_call_into_another_program_and_out_of_range() {
    let path = build("tailcall");
    for (slot, action) in [(1, 3), (2, 1), (7, 1)] {
        let mut state = jmp_state("chain");
        state.extend(cfg_state(&[slot, 0]));
        let ours = load_ours(&path, Some(&state));
        let kernel = load_kernel(&path, Some(&state), "tail call to another program");
        let (result, _) = run_both(
            &ours,
            kernel.as_ref(),
            "chain",
            &packet(64),
            0,
            &[],
            "other",
        );
        assert_eq!(result.retval, action, "slot {slot}");
    }
}
