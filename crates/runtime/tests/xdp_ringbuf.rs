//! Ring-buffer helpers, events read back with `RingbufConsumer`.

mod xdp_support;

use bpfjet_maps::RingbufConsumer;
use xdp_support::*;

#[test]
fn events_reach_the_consumer() {
    let path = build("ringbuf");
    let ours = load_ours(&path, None);
    let result = run_ours(&ours, "emit", &packet(70), 0);
    assert_eq!(result.retval, 2);
    assert!(result.notes.is_empty(), "{:?}", result.notes);
    let out = out_vals(&ours.dump_state().unwrap());
    assert_eq!(out[0], 0, "ringbuf_output");
    assert_eq!(out[1], -22, "ringbuf_output with unknown flags");
    assert_eq!(out[2], 1, "reserve with flags gives NULL");
    assert_eq!(out[3], 4096, "BPF_RB_RING_SIZE");
    assert_eq!(out[4], 1, "reserve larger than the ring gives NULL");
    let mut consumer = RingbufConsumer::new(ours.map("events").unwrap()).unwrap();
    let mut events = Vec::new();
    consumer.poll(|e| events.push(e.to_vec()));
    assert_eq!(
        events,
        vec![
            70u64.to_le_bytes().to_vec(),
            0x1122334455667788u64.to_le_bytes().to_vec()
        ],
        "the discarded sample is skipped"
    );
    assert!(
        !ours.dump_state().unwrap().contains_key("events"),
        "rings are not dumped"
    );
}
