//! Ring buffers against the kernel: examples/control_plane/rb_demo.bpf.c
//! (reserve/submit, reserve/discard with BPF_RB_NO_WAKEUP, bpf_ringbuf_output
//! of variable sizes, bpf_ringbuf_query into a map) run by `bpfjet test-run`
//! on the interpreter, the JIT and the kernel's BPF_PROG_TEST_RUN. The
//! unconsumed records (raw headers with BUSY/DISCARD bits and pg_off, bytes,
//! order), the positions and the query values must be equal — after one
//! run, and after 100 runs that overflow the 4 KiB ring (reserve returns
//! NULL, output -EAGAIN, at the same records).

mod support;

use support::{bpfjet, repo_root, Scratch};

/// (retval, data_out, maps, ringbufs) of one run.
fn outcome(obj: &str, packet: &str, engine: &str, repeat: u32) -> serde_json::Value {
    let repeat = repeat.to_string();
    let run = bpfjet(
        &[
            "test-run",
            obj,
            "--data",
            packet,
            "--engine",
            engine,
            "--repeat",
            &repeat,
            "--json",
            "--dump-maps",
        ],
        b"",
    );
    assert_eq!(run.code, Some(0), "{engine}: {}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON report");
    serde_json::json!({
        "retval": v["retval"],
        "data_out": v["data_out"],
        "maps": v["maps"],
        "ringbufs": v["ringbufs"],
    })
}

fn engines_agree(test: &str, repeat: u32) -> serde_json::Value {
    let dir = Scratch::new(test);
    let source = std::fs::read_to_string(repo_root().join("examples/control_plane/rb_demo.bpf.c"))
        .expect("examples/control_plane/rb_demo.bpf.c");
    let obj = dir.compile_c("rb_demo", &source);
    let packet = dir.file(
        "pkt.bin",
        (0u8..64)
            .map(|i| i.wrapping_mul(7).wrapping_add(3))
            .collect::<Vec<u8>>(),
    );
    let interp = outcome(&obj, &packet, "interp", repeat);
    let jit = outcome(&obj, &packet, "jit", repeat);
    assert_eq!(interp, jit, "{test}: interp vs jit");
    match bpfjet_kernel::kernel_available() {
        Ok(()) => {
            let kernel = outcome(&obj, &packet, "kernel", repeat);
            assert_eq!(
                serde_json::to_string_pretty(&interp).unwrap(),
                serde_json::to_string_pretty(&kernel).unwrap(),
                "{test}: bpfjet vs kernel"
            );
        }
        Err(why) => support::skip(test, &why),
    }
    interp
}

fn stat(v: &serde_json::Value, key: usize) -> u64 {
    let hex = v["maps"]["stats"][key]["value"]
        .as_str()
        .expect("stats value");
    let bytes = bpfjet_maps::state::parse_hex(hex).expect("hex");
    u64::from_le_bytes(bytes[..8].try_into().unwrap())
}

#[test]
fn one_run_records_and_query_equal_the_kernel() {
    let v = engines_agree("ringbuf_one_run", 1);
    let ring = &v["ringbufs"]["events"];
    let records = ring["records"].as_array().expect("records");
    // event (submitted), the discarded 40 bytes, the 12-byte output.
    assert_eq!(records.len(), 3, "{ring}");
    assert_eq!(records[1]["header_len"], 40 | (1 << 30), "DISCARD bit");
    assert_eq!(ring["producer_pos"], 40 + 48 + 24);
    assert_eq!(stat(&v, 3), 40 + 48 + 24, "BPF_RB_AVAIL_DATA");
    assert_eq!(stat(&v, 6), 4096, "BPF_RB_RING_SIZE");
}

#[test]
fn overflow_drops_the_same_records_as_the_kernel() {
    let v = engines_agree("ringbuf_overflow", 100);
    let (reserve_failed, output_failed) = (stat(&v, 1), stat(&v, 2));
    assert!(
        reserve_failed > 0 && output_failed > 0,
        "the ring must overflow: {reserve_failed} {output_failed}"
    );
    let ring = &v["ringbufs"]["events"];
    assert!(ring["producer_pos"].as_u64().unwrap() > 4096 - 64, "{ring}");
}

/// `bpfjet map dump --instance NAME RING` from another process reads the
/// ring's counters live.
#[test]
fn map_dump_of_a_ring_prints_its_counters() {
    use bpfjet_maps::{Instance, MapOptions, MapSpec, MapType, RingbufConsumer};
    let name = format!("t{}-rbdump", std::process::id());
    let inst = Instance::create(&name, 1).expect("instance");
    let rb = inst
        .create_map(
            &MapSpec::new("events", MapType::Ringbuf, 0, 0, 4096),
            &MapOptions::default(),
        )
        .expect("ring");
    for _ in 0..3 {
        rb.ringbuf_output(&[1; 1200], 0).expect("room");
    }
    assert!(rb.ringbuf_output(&[1; 1200], 0).is_err(), "full");
    let d = rb.ringbuf_reserve(8, 0).expect("room for 8");
    // SAFETY: a live sample of this ring.
    unsafe { bpfjet_maps::Map::ringbuf_discard(d, 0) };
    let mut c = RingbufConsumer::new(rb.clone()).unwrap();
    assert_eq!(c.poll(|_| {}), 3);
    rb.ringbuf_output(&[2; 16], 0).expect("room again");
    let run = bpfjet(
        &["map", "dump", "--instance", &name, "events", "--json"],
        b"",
    );
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let v: serde_json::Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(
        v["events"],
        serde_json::json!({"produced": 4, "consumed": 3, "dropped": 1, "discarded": 1,
                           "in_flight": 0, "backpressure_ms": null})
    );
}
