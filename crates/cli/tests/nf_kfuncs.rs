//! The NF library examples (`examples/nf`), each built plain and with
//! bpfjet's kfuncs: on the same stream of frames, the kernel running the
//! plain build, bpfjet's interpreter (bounds-checked and verified) and JIT
//! running both builds must agree frame by frame on the verdict and, at the
//! end, on every map a control plane reads (sketch counters, flow table).
//!
//! The kfunc builds' native code must have no call left for the kfuncs
//! that have an inline form (bit scans, bucket search, CRC32C, count-min,
//! list-buckets), and none through the helper trampoline at all.
//!
//! Without a usable kernel the kernel column is skipped with a message;
//! the bpfjet engines are still compared with each other.

mod nf_tss;
mod support;

use bpfjet_jit::{DumpStage, JitObject, JitOptions, XdpEngine};
use bpfjet_maps::state::MapState;
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use std::path::{Path, PathBuf};

/// Frames of `flows` IPv4 flows (UDP and TCP) in a skewed mix — low flow
/// numbers repeat often, so sketches see heavy hitters and flow tables
/// see hits — plus non-IPv4 and truncated frames.
fn frames(flows: u32, count: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::with_capacity(count);
    let mut x: u32 = 0x1234_5678;
    for i in 0..count {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        if i % 41 == 7 {
            // ARP: not IPv4.
            let mut f = vec![0u8; 42];
            f[12] = 0x08;
            f[13] = 0x06;
            out.push(f);
            continue;
        }
        if i % 53 == 11 {
            out.push(vec![0u8; 20]);
            continue;
        }
        // Skewed: the minimum of two draws favours small flow numbers.
        let flow = (x % flows).min((x >> 16) % flows);
        let proto = if flow.is_multiple_of(3) { 6u8 } else { 17u8 };
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12] = 0x08;
        f[13] = 0x00;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[3] = 40;
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
        ip[16..20].copy_from_slice(&[192, 168, 1, (flow % 7) as u8]);
        let l4 = &mut f[34..];
        l4[0..2].copy_from_slice(&(1024 + flow as u16).to_be_bytes());
        l4[2..4].copy_from_slice(&(80u16 + (flow % 5) as u16).to_be_bytes());
        out.push(f);
    }
    out
}

fn nf_object(name: &str) -> PathBuf {
    let path = support::corpus_build_dir().join(format!("nf/{name}.o"));
    assert!(
        path.exists(),
        "{} missing after make -C examples",
        path.display()
    );
    path
}

/// The maps a control plane reads: the NF's own, not the global-data maps
/// (`.rodata` holds the plain build's CRC table only). A map named
/// `sampler` (NitroSketch's per-CPU geometric sampler) is laid out
/// differently by the two builds: what they share is its leading u32, the
/// countdown of events to skip, which is all that is compared. Maps named
/// `queues` are left out: Carousel's hold its wheels' slots as rings
/// (plain) or in list-buckets (kfunc); Eiffel's (rings in both builds)
/// are covered by its occupancy bitmap and statistics (what was dequeued,
/// in which order: rank sum, id xor), Carousel's by its statistics
/// (released ids and timestamps) and the flows' pacing state.
fn nf_maps(mut maps: MapState) -> MapState {
    maps.retain(|name, _| !name.starts_with('.') && name != "queues");
    if let Some(entries) = maps.get_mut("sampler") {
        let countdown = |hex: &String| {
            let bytes = bpfjet_maps::state::parse_hex(hex).unwrap();
            bpfjet_maps::state::to_hex(&bytes[..4])
        };
        for e in entries {
            e.value = e.value.as_ref().map(countdown);
            e.values = e.values.as_ref().map(|v| v.iter().map(countdown).collect());
        }
    }
    maps
}

/// Verdicts of every frame and the maps afterwards, on one engine.
struct Outcome {
    engine: String,
    verdicts: Vec<u32>,
    maps: MapState,
}

fn on_bpfjet(
    path: &Path,
    prog: &str,
    frames: &[Vec<u8>],
    engine: &str,
    state: Option<&MapState>,
) -> Outcome {
    let obj = bpfjet_obj::load_file(path).unwrap();
    let opts = ObjectOptions {
        state: state.cloned(),
        ..ObjectOptions::default()
    };
    let (verdicts, maps) = match engine {
        "interp-checked" => {
            let mut o = opts.clone();
            o.unverified = true;
            let loaded =
                LoadedObject::load(&obj, &o).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let v = frames
                .iter()
                .map(|f| {
                    loaded
                        .test_run(prog, f, &TestRunOptions::default())
                        .unwrap()
                        .retval
                })
                .collect();
            (v, loaded.dump_state().unwrap())
        }
        _ => {
            let e = if engine == "jit" {
                XdpEngine::Jit
            } else {
                XdpEngine::Interp
            };
            let jit = JitObject::load(&obj, &opts, &JitOptions::uncached())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let v = frames
                .iter()
                .map(|f| {
                    jit.test_run(prog, f, &TestRunOptions::default(), e)
                        .unwrap()
                        .retval
                })
                .collect();
            (v, jit.loaded().dump_state().unwrap())
        }
    };
    Outcome {
        engine: format!(
            "bpfjet {engine} on {}",
            path.file_name().unwrap().to_string_lossy()
        ),
        verdicts,
        maps: nf_maps(maps),
    }
}

fn on_kernel(
    path: &Path,
    prog: &str,
    frames: &[Vec<u8>],
    state: Option<&MapState>,
) -> Option<Outcome> {
    if let Err(why) = bpfjet_kernel::kernel_available() {
        support::skip("NF kfunc differential test, kernel column", &why);
        return None;
    }
    let opts = bpfjet_kernel::LoadOptions {
        state,
        ..Default::default()
    };
    let k = bpfjet_kernel::KernelObject::open_with(path, &opts)
        .unwrap_or_else(|e| panic!("kernel load of {}: {e}", path.display()));
    let verdicts = frames
        .iter()
        .map(|f| k.test_run(prog, f, 1, Some(0)).unwrap().retval)
        .collect();
    Some(Outcome {
        engine: format!("kernel on {}", path.file_name().unwrap().to_string_lossy()),
        verdicts,
        maps: nf_maps(k.dump_maps().unwrap()),
    })
}

fn differential(plain: &str, kfunc: &str, prog: &str, frames: &[Vec<u8>]) -> Vec<u32> {
    differential_from(plain, kfunc, prog, frames, None)
}

/// [`differential`] with maps a control plane filled before the first frame.
fn differential_from(
    plain: &str,
    kfunc: &str,
    prog: &str,
    frames: &[Vec<u8>],
    state: Option<&MapState>,
) -> Vec<u32> {
    let plain = nf_object(plain);
    let kfunc = nf_object(kfunc);
    let mut outcomes: Vec<Outcome> = on_kernel(&plain, prog, frames, state).into_iter().collect();
    for engine in ["interp", "jit"] {
        outcomes.push(on_bpfjet(&plain, prog, frames, engine, state));
    }
    for engine in ["interp-checked", "interp", "jit"] {
        outcomes.push(on_bpfjet(&kfunc, prog, frames, engine, state));
    }
    let reference = &outcomes[0];
    for o in &outcomes[1..] {
        if let Some(i) = (0..frames.len()).find(|&i| o.verdicts[i] != reference.verdicts[i]) {
            panic!(
                "frame {i}: {} says {}, {} says {}",
                reference.engine, reference.verdicts[i], o.engine, o.verdicts[i]
            );
        }
        assert!(!o.maps.is_empty(), "{}: no maps", o.engine);
        assert!(
            o.maps == reference.maps,
            "maps after {} frames differ between {} and {}",
            frames.len(),
            reference.engine,
            o.engine
        );
    }
    reference.verdicts.clone()
}

fn count(verdicts: &[u32], action: u32) -> usize {
    verdicts.iter().filter(|&&v| v == action).count()
}

const DROP: u32 = 1;
const PASS: u32 = 2;
const TX: u32 = 3;
const REDIRECT: u32 = 4;

#[test]
fn countmin_plain_and_kfunc_builds_agree_with_the_kernel() {
    let frames = frames(40, 400);
    for h in [1, 2, 4, 8] {
        let v = differential(
            &format!("countmin_h{h}_plain"),
            &format!("countmin_h{h}_kfunc"),
            "countmin",
            &frames,
        );
        // Heavy flows were dropped, light ones passed: both paths ran.
        assert!(
            count(&v, DROP) > 0 && count(&v, PASS) > 0,
            "{h} hashes: {v:?}"
        );
    }
}

#[test]
fn cuckoo_plain_and_kfunc_builds_agree_with_the_kernel() {
    // 64 buckets x 16 slots, 2 choices per flow: 300 flows give hits and
    // inserts; 6000 flows overflow the 1024 slots (drops).
    for (flows, n) in [(300, 1500), (6000, 3000)] {
        let frames = frames(flows, n);
        let v = differential("cuckoo_plain", "cuckoo_kfunc", "cuckoo", &frames);
        assert!(count(&v, PASS) > 0, "{flows} flows: nothing passed");
        if flows > 5000 {
            assert!(
                count(&v, DROP) > 0,
                "{flows} flows: no bucket pair filled up"
            );
        }
    }
}

#[test]
fn nitrosketch_plain_and_kfunc_builds_agree_with_the_kernel() {
    // Skewed flows: heavy ones cross the threshold in the rows sampled.
    let frames = frames(30, 2500);
    for inv in [4, 16, 64] {
        let v = differential(
            &format!("nitro_p{inv}_plain"),
            &format!("nitro_p{inv}_kfunc"),
            "nitro",
            &frames,
        );
        assert!(count(&v, DROP) > 0 && count(&v, PASS) > 0, "1/{inv}: {v:?}");
    }
}

#[test]
fn eiffel_plain_and_kfunc_builds_agree_with_the_kernel() {
    // 1000 frames of 8 packets each: the queue's 128 packets cycle through
    // every level of the bitmap hierarchy (three at 65536 buckets).
    let frames = frames(400, 1000);
    for levels in [64, 1024, 4096, 65536] {
        let v = differential(
            &format!("eiffel_l{levels}_plain"),
            &format!("eiffel_l{levels}_kfunc"),
            "eiffel",
            &frames,
        );
        // Queued (pass), a packet of the frame's batch dequeued at once
        // (tx); with 64 buckets some bucket fills up (drop).
        assert!(
            count(&v, PASS) > 0 && count(&v, TX) > 0,
            "{levels} levels: {v:?}"
        );
        if levels == 64 {
            assert!(count(&v, DROP) > 0, "{levels} levels: no level filled up");
        }
        assert!(!v.contains(&0), "{levels} levels: aborted");
    }
}

#[test]
fn heavykeeper_plain_and_kfunc_builds_agree_with_the_kernel() {
    // 40 skewed flows: more than the 16 top-k entries (replacements), and
    // the heaviest reach the drop threshold; the sketch's decay decisions
    // come from the program's own xorshift state, so they agree too.
    let frames = frames(40, 3000);
    for rows in [1, 2, 4] {
        let v = differential(
            &format!("heavykeeper_r{rows}_plain"),
            &format!("heavykeeper_r{rows}_kfunc"),
            "heavykeeper",
            &frames,
        );
        assert!(
            count(&v, DROP) > 0 && count(&v, PASS) > 0,
            "{rows} rows: {v:?}"
        );
    }
}

#[test]
fn cuckoo_filter_plain_and_kfunc_builds_agree_with_the_kernel() {
    // Members pass, new flows are inserted (tx); in the small filter (64
    // buckets of 8) 6000 flows force evictions and failed inserts (drop).
    for (plain, kfunc, flows, n) in [
        (
            "cuckoofilter_s16_plain",
            "cuckoofilter_s16_kfunc",
            300,
            1500,
        ),
        (
            "cuckoofilter_small_plain",
            "cuckoofilter_small_kfunc",
            300,
            1500,
        ),
        (
            "cuckoofilter_small_plain",
            "cuckoofilter_small_kfunc",
            6000,
            3000,
        ),
    ] {
        let frames = frames(flows, n);
        let v = differential(plain, kfunc, "cuckoofilter", &frames);
        assert!(
            count(&v, PASS) > 0 && count(&v, TX) > 0,
            "{kfunc}, {flows} flows: {v:?}"
        );
        if flows > 5000 {
            assert!(
                count(&v, DROP) > 0,
                "{kfunc}, {flows} flows: nothing failed"
            );
        }
    }
}

#[test]
fn variable_increment_bloom_plain_and_kfunc_builds_agree_with_the_kernel() {
    // Every seventh TCP frame goes to port 9 (discard): a member there is
    // deleted (drop) and inserted again by its next packet (tx).
    let mut frames = frames(300, 2500);
    for (i, f) in frames.iter_mut().enumerate() {
        if f.len() >= 38 && f[12..14] == [8, 0] && f[23] == 6 && i % 7 == 0 {
            f[36..38].copy_from_slice(&9u16.to_be_bytes());
        }
    }
    for k in [2, 4, 8] {
        let v = differential(
            &format!("vibloom_k{k}_plain"),
            &format!("vibloom_k{k}_kfunc"),
            "vibloom",
            &frames,
        );
        assert!(
            count(&v, PASS) > 0 && count(&v, TX) > 0 && count(&v, DROP) > 0,
            "{k} hashes: {v:?}"
        );
    }
}

#[test]
fn carousel_plain_and_kfunc_builds_agree_with_the_kernel() {
    // Rare flows go out at once (tx); heavy ones are paced (queued: pass)
    // until their backlog passes the wheel's horizon or a slot fills
    // (drop). Released packets (ids, timestamps) are in the statistics.
    for (flows, n) in [(400, 2000), (8, 2500)] {
        let frames = frames(flows, n);
        for fine in [64, 128, 256] {
            let v = differential(
                &format!("carousel_w{fine}_plain"),
                &format!("carousel_w{fine}_kfunc"),
                "carousel",
                &frames,
            );
            assert!(
                count(&v, TX) > 0 && count(&v, PASS) > 0,
                "{fine} slots, {flows} flows: {v:?}"
            );
            if flows < 100 {
                assert!(count(&v, DROP) > 0, "{fine} slots, {flows} flows: no drop");
            }
            assert!(!v.contains(&0), "{fine} slots: aborted");
        }
    }
}

#[test]
fn edf_load_balancer_plain_and_kfunc_builds_agree_with_the_kernel() {
    // Every IPv4 packet is sent to a backend (tx), the rest pass; the
    // deadlines and per-backend counts a control plane reads must agree.
    let frames = frames(200, 1500);
    for backends in [4, 8, 16, 32] {
        let v = differential(
            &format!("edflb_b{backends}_plain"),
            &format!("edflb_b{backends}_kfunc"),
            "edflb",
            &frames,
        );
        assert!(
            count(&v, TX) > 0 && count(&v, PASS) > 0,
            "{backends}: {v:?}"
        );
        assert!(!v.contains(&DROP) && !v.contains(&0), "{backends}: {v:?}");
    }
}

/// Calls to `symbol` in optimized IR (the declaration is not a call).
fn calls(ir: &str, symbol: &str) -> usize {
    ir.lines()
        .filter(|l| l.contains("call ") && l.contains(&format!("@{symbol}(")))
        .count()
}

#[test]
fn inlined_kfuncs_leave_no_call_in_native_code() {
    let obj = bpfjet_obj::load_file(nf_object("cuckoo_kfunc")).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit.dump("cuckoo", DumpStage::OptimizedIr, true).unwrap();
    assert_eq!(
        calls(&ir, "bpfjet_jit_helper"),
        0,
        "trampoline calls left:\n{ir}"
    );
    assert_eq!(
        calls(&ir, "bpfjet_kfunc_bpfjet_find_u16"),
        0,
        "bucket search not inlined:\n{ir}"
    );
    let sse42 = std::arch::is_x86_feature_detected!("sse4.2");
    if sse42 {
        assert_eq!(
            calls(&ir, "bpfjet_kfunc_bpfjet_crc32c"),
            0,
            "CRC32C not inlined:\n{ir}"
        );
        assert!(
            ir.contains("llvm.x86.sse42.crc32"),
            "no crc32 instruction:\n{ir}"
        );
    } else {
        support::skip("CRC32C inlining check", "this CPU has no SSE4.2");
    }
    // Native code: no call instruction at all for this program.
    let asm = jit.dump("cuckoo", DumpStage::Assembly, true).unwrap();
    let native_calls: Vec<&str> = asm
        .lines()
        .filter(|l| l.trim_start().starts_with("call"))
        .collect();
    if sse42 {
        assert!(native_calls.is_empty(), "calls left: {native_calls:?}");
    }

    // The fused count-min update with constant sizes and k: compiled in
    // (8 crc32 chains), no call at all.
    let obj = bpfjet_obj::load_file(nf_object("countmin_h8_kfunc")).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit.dump("countmin", DumpStage::OptimizedIr, true).unwrap();
    assert_eq!(calls(&ir, "bpfjet_jit_helper"), 0, "{ir}");
    let expected = if sse42 { 0 } else { 1 };
    assert_eq!(calls(&ir, "bpfjet_kfunc_bpfjet_cm_inc"), expected, "{ir}");
    if sse42 {
        let asm = jit.dump("countmin", DumpStage::Assembly, true).unwrap();
        let native_calls: Vec<&str> = asm
            .lines()
            .filter(|l| l.trim_start().starts_with("call"))
            .collect();
        assert!(native_calls.is_empty(), "calls left: {native_calls:?}");
    }
}

#[test]
fn sampler_skip_path_is_compiled_in() {
    // The skip path, almost every event, and the draw of the next count
    // from the pool call nothing; only a refill calls the native.
    let obj = bpfjet_obj::load_file(nf_object("nitro_p16_kfunc")).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit.dump("nitro", DumpStage::OptimizedIr, true).unwrap();
    assert_eq!(calls(&ir, "bpfjet_jit_helper"), 0, "{ir}");
    // One countdown test per row (NROWS = 4). The inline form's blocks
    // (skip: decrement in place; take / hit: the next count from the pool)
    // call nothing; only the draw blocks (a refill) call the native. LLVM
    // may thread or merge some of them (the program's own all-rows skip
    // comes first), so every one left is checked.
    let due = ir.matches("icmp eq i32 %kfunc_load").count();
    assert!(due >= 4, "{due} countdown tests:\n{ir}");
    let blocks: Vec<&str> = ir.split("\n\n").collect();
    let inline: Vec<&&str> = blocks
        .iter()
        .filter(|b| b.starts_with("geo_") && !b.starts_with("geo_draw"))
        .collect();
    for b in &inline {
        assert!(!b.contains("call "), "a call on the inline path:\n{b}");
    }
    let takes = inline.iter().filter(|b| b.starts_with("geo_hit")).count();
    assert!(takes >= 3, "in-place draws:\n{ir}");
    assert!(
        ir.contains("store i32 %geo_left"),
        "no in-place decrement:\n{ir}"
    );
    let draws = calls(&ir, "bpfjet_kfunc_bpfjet_geo_should_do");
    assert_eq!(draws, 4, "native draws:\n{ir}");
    if std::arch::is_x86_feature_detected!("sse4.2") {
        assert_eq!(calls(&ir, "bpfjet_kfunc_bpfjet_crc32c"), 0, "{ir}");
    }
}

#[test]
fn eiffel_bit_scans_are_compiled_in() {
    // The find-first-set steps of a dequeue's walk down the three-level
    // hierarchy: `llvm.cttz`, no call; the native code calls nothing at all.
    let obj = bpfjet_obj::load_file(nf_object("eiffel_l65536_kfunc")).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    let ir = jit.dump("eiffel", DumpStage::OptimizedIr, true).unwrap();
    assert_eq!(calls(&ir, "bpfjet_jit_helper"), 0, "{ir}");
    assert_eq!(calls(&ir, "bpfjet_kfunc_bpfjet_ctz64"), 0, "{ir}");
    assert!(ir.contains("@llvm.cttz.i64("), "{ir}");
    let asm = jit.dump("eiffel", DumpStage::Assembly, true).unwrap();
    let native_calls: Vec<&str> = asm
        .lines()
        .filter(|l| l.trim_start().starts_with("call"))
        .collect();
    assert!(native_calls.is_empty(), "calls left: {native_calls:?}");
}

/// The kfuncs whose inline form replaces every call (the geometric
/// sampler's form keeps the native for the sampled event, by design; the
/// CRC32C-based forms need SSE4.2 on the target).
fn fully_inlined(k: &bpfjet_kfuncs::Kfunc, sse42: bool) -> bool {
    use bpfjet_kfuncs::Inline;
    match k.inline {
        None | Some(Inline::GeoCountdown) => false,
        Some(Inline::Crc32c | Inline::CountMin { .. }) => sse42,
        Some(_) => true,
    }
}

#[test]
fn kfunc_builds_call_no_kfunc_that_has_an_inline_form() {
    // Every kfunc build of examples/nf, every program: the native code's
    // call instructions name only kfuncs without an inline form (or the
    // sampler's draw), never the helper trampoline.
    let sse42 = std::arch::is_x86_feature_detected!("sse4.2");
    let dir = support::corpus_build_dir().join("nf");
    let mut objects: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with("_kfunc.o"))
        .collect();
    objects.sort();
    assert!(objects.len() >= 10, "kfunc builds: {objects:?}");
    let (mut checked, mut kfunc_calls) = (0, 0);
    for path in &objects {
        let obj = bpfjet_obj::load_file(path).unwrap();
        let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for prog in jit.program_names() {
            let asm = jit.dump(prog, DumpStage::Assembly, true).unwrap();
            for line in asm.lines().map(str::trim) {
                let Some(target) = line.strip_prefix("call") else {
                    continue;
                };
                // `callq\tsymbol@PLT`: a direct call names its target.
                let target = target.trim_start_matches('q').trim();
                let symbol = target.split('@').next().unwrap_or_default();
                assert!(
                    !symbol.starts_with('*') && !symbol.contains("bpfjet_jit_helper"),
                    "{} ({prog}): call through a register or the trampoline: {line}",
                    path.display()
                );
                if let Some(k) = bpfjet_kfuncs::KFUNCS.iter().find(|k| symbol == k.symbol()) {
                    assert!(
                        !fully_inlined(k, sse42),
                        "{} ({prog}): {} has an inline form but is called",
                        path.display(),
                        k.name
                    );
                    kfunc_calls += 1;
                }
                checked += 1;
            }
        }
    }
    // The one-time layouts and the sampler's draws are found as kfunc
    // calls: the symbols are recognised.
    assert!(
        kfunc_calls > 0,
        "no kfunc call recognised in {checked} calls"
    );
    println!(
        "{} kfunc builds, {checked} calls left ({kfunc_calls} to kfuncs), none to an inlined kfunc",
        objects.len()
    );
}

/// Prints the plain count-min's native code (`cargo test ... -- --ignored
/// --nocapture`): for looking at what the JIT made of the CRC table walk.
#[test]
#[ignore]
fn show_plain_countmin_code() {
    let obj = bpfjet_obj::load_file(nf_object("countmin_h1_plain")).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    println!(
        "{}",
        jit.dump("countmin", DumpStage::Assembly, true).unwrap()
    );
}

#[test]
fn tuple_space_search_plain_and_kfunc_builds_agree_with_the_kernel() {
    // Rules for keys of the traffic under every tuple's mask, so a frame
    // matches in several tuples and the priorities decide; some tuples
    // compiled in are left unused (the program stops at `ntuples`).
    let frames = frames(300, 2000);
    for (capacity, used) in [(4, 4), (16, 15), (64, 60)] {
        let rules = nf_tss::RuleSet::for_frames(capacity, used, 12, &frames);
        let state = rules.state();
        let v = differential_from(
            &format!("tss_t{capacity}_plain"),
            &format!("tss_t{capacity}_kfunc"),
            "tss",
            &frames,
            Some(&state),
        );
        // The verdicts are the reference classifier's (highest priority of
        // the rules whose masked key matches, pass on a miss).
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(v[i], rules.verdict(f), "{capacity} tuples, frame {i}");
        }
        let matched = frames
            .iter()
            .filter(|f| rules.classify(f).is_some())
            .count();
        assert!(
            count(&v, DROP) > 0 && count(&v, PASS) > 0 && count(&v, REDIRECT) > 0,
            "{capacity} tuples: {v:?}"
        );
        assert!(
            matched > frames.len() / 4 && matched < frames.len(),
            "{capacity} tuples: {matched} of {} frames matched a rule",
            frames.len()
        );
    }
}

/// Prints any NF build's native code or optimized IR (`NF_OBJ=eiffel_l4096_kfunc
/// NF_PROG=eiffel [NF_STAGE=ir] cargo test ... show_nf_code -- --ignored
/// --nocapture`): for profiling what the JIT made of a build.
#[test]
#[ignore]
fn show_nf_code() {
    let name = std::env::var("NF_OBJ").expect("NF_OBJ: a build in build/examples/nf");
    let prog = std::env::var("NF_PROG").expect("NF_PROG: the program's name");
    let stage = match std::env::var("NF_STAGE").as_deref() {
        Ok("ir") => DumpStage::OptimizedIr,
        _ => DumpStage::Assembly,
    };
    let obj = bpfjet_obj::load_file(nf_object(&name)).unwrap();
    let jit = JitObject::load(&obj, &ObjectOptions::default(), &JitOptions::uncached()).unwrap();
    println!("{}", jit.dump(&prog, stage, true).unwrap());
}
