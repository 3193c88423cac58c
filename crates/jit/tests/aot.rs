//! AOT artifacts of the corpus: compiled in one `JitObject`, written to
//! bytes, read back and loaded against a fresh load of the object (new map
//! instances at new addresses), they must run every fixture case like the
//! reference interpreter, without LLVM compiling anything. The LLVM
//! compilation counter is process-wide, so the tests take turns (`SERIAL`).

use bpfjet_jit::{
    llvm_compilations, AotArtifact, AotError, CacheMode, DumpStage, JitObject, JitOptions,
    XdpEngine,
};
use bpfjet_maps::state::load_state;
use bpfjet_runtime::{LoadedObject, ObjectOptions, TestRunOptions};
use serde_json::Value;

mod fixtures;
use fixtures::*;

/// Held by every test: another test compiling would move the counter.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const CORPUS: &[&str] = &[
    "cms_sketch",
    "firewall",
    "icmp_echo",
    "katran_lb",
    "rate_limiter",
    "ringbuf_sampler",
    "router_tailcall",
    "xdp_redirect",
];

/// Compile `name` once, then check every fixture case on the artifact.
fn check_corpus(name: &str) {
    let path = corpus_object(name);
    let source = std::fs::read(&path).unwrap();
    let object = bpfjet_obj::load_file(&path).unwrap();
    let (prog, cases) = corpus_cases(name);
    let prog = prog.as_str();
    let jit = JitOptions {
        cache: CacheMode::Off,
        ..JitOptions::default()
    };
    let compile_from = LoadedObject::load(&object, &ObjectOptions::default()).unwrap();
    let artifact = AotArtifact::compile(&compile_from, &source, name, &[], &jit)
        .unwrap_or_else(|e| panic!("{name}: compile: {e}"));
    let bytes = artifact.to_bytes();
    let artifact = AotArtifact::from_bytes(&bytes).unwrap();
    artifact.check_source(&source).unwrap();

    for Case {
        label,
        state,
        packet: pkt,
        run_opts,
        ignore,
    } in cases
    {
        let reference = LoadedObject::load(&object, &options(&state)).unwrap();
        let want = reference.test_run(prog, &pkt, &run_opts).unwrap();
        let want_maps = without(reference.dump_state().unwrap(), ignore);

        let compiled_before = llvm_compilations();
        let loaded = LoadedObject::load(&object, &options(&state)).unwrap();
        let fast = artifact
            .load(loaded)
            .unwrap_or_else(|e| panic!("{label}: AOT load: {e}"));
        let stats = fast.program(prog).unwrap().compile_stats().clone();
        assert!(stats.prebuilt && !stats.cache_hit, "{label}: {stats:?}");
        let got = fast
            .test_run(prog, &pkt, &run_opts, XdpEngine::Jit)
            .unwrap_or_else(|e| panic!("{label}: {e}"));
        assert_eq!(
            llvm_compilations(),
            compiled_before,
            "{label}: loading and running the artifact compiled with LLVM"
        );
        assert_eq!(got.retval, want.retval, "{label}: action");
        assert_eq!(got.data_out, want.data_out, "{label}: data_out");
        let got_maps = without(fast.loaded().dump_state().unwrap(), ignore);
        assert_eq!(got_maps, want_maps, "{label}: maps");
    }
}

#[test]
fn corpus_artifacts_run_like_the_interpreter_without_llvm() {
    let _turn = serial();
    for name in CORPUS {
        check_corpus(name);
    }
}

/// Map handles and values are `movabs` of the map symbols, never the
/// addresses of this process's maps.
#[test]
fn generated_code_names_maps_by_symbol() {
    let _turn = serial();
    let path = corpus_object("katran_lb");
    let object = bpfjet_obj::load_file(&path).unwrap();
    let jit = JitOptions {
        cache: CacheMode::Off,
        ..JitOptions::default()
    };
    let fast = JitObject::load(&object, &ObjectOptions::default(), &jit).unwrap();
    let prog = fast.program_names()[0].to_string();
    let asm = fast.dump(&prog, DumpStage::Assembly, true).unwrap();
    assert!(
        asm.contains("movabsq\t$bpfjet_map_"),
        "no movabs of a map symbol in:\n{asm}"
    );
    for map in fast.loaded().object_maps().maps() {
        let handle = bpfjet_maps::Map::handle(map) as u64;
        for text in [handle.to_string(), format!("{handle:#x}")] {
            assert!(
                !asm.contains(&text),
                "map address {text} baked into the code"
            );
        }
    }
}

#[test]
fn artifacts_refuse_other_objects_and_damage() {
    let _turn = serial();
    let fw = corpus_object("firewall");
    let lb = corpus_object("katran_lb");
    let fw_source = std::fs::read(&fw).unwrap();
    let lb_source = std::fs::read(&lb).unwrap();
    let fw_object = bpfjet_obj::load_file(&fw).unwrap();
    let lb_object = bpfjet_obj::load_file(&lb).unwrap();
    let loaded = LoadedObject::load(&fw_object, &ObjectOptions::default()).unwrap();
    let artifact =
        AotArtifact::compile(&loaded, &fw_source, "firewall", &[], &JitOptions::default()).unwrap();
    let err = artifact.check_source(&lb_source).unwrap_err();
    assert!(err.to_string().contains("different BPF object"), "{err}");
    // Another object's maps are refused before any code is loaded.
    let other = LoadedObject::load(&lb_object, &ObjectOptions::default()).unwrap();
    let err = artifact.load(other).unwrap_err();
    assert!(matches!(err, AotError::Mismatch(_)), "{err}");
    let mut bytes = artifact.to_bytes();
    let n = bytes.len();
    bytes[n / 3] ^= 0x40;
    assert!(matches!(
        AotArtifact::from_bytes(&bytes),
        Err(AotError::Format(_))
    ));
}

/// Two loads of one object have their maps at different addresses; the
/// code does not depend on them, so the second load is a cache hit (on
/// disk, the same holds across processes) and still runs correctly.
#[test]
fn cache_hits_across_map_instances() {
    let _turn = serial();
    let name = "firewall";
    let path = corpus_object(name);
    let object = bpfjet_obj::load_file(&path).unwrap();
    let fixtures = workspace().join(format!("examples/xdp/fixtures/{name}"));
    let cases: Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("cases.json")).unwrap())
            .unwrap();
    let prog = cases["prog"].as_str().unwrap();
    let case = &cases["cases"][0];
    let state = load_state(&state_path(&fixtures, case["state"].as_str().unwrap())).unwrap();
    let pkt = read_hex(&fixtures.join(case["packet"].as_str().unwrap()));
    // A cache of our own, so that no other test's entry is hit.
    let dir = std::env::temp_dir().join(format!("bpfjet-aot-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let jit = JitOptions {
        cache: CacheMode::Disk(dir.clone()),
        ..JitOptions::default()
    };
    let first = JitObject::load(&object, &options(&state), &jit).unwrap();
    let second = JitObject::load(&object, &options(&state), &jit).unwrap();
    let handles = |o: &JitObject| -> Vec<u64> {
        o.loaded()
            .object_maps()
            .maps()
            .iter()
            .map(|m| bpfjet_maps::Map::handle(m) as u64)
            .collect()
    };
    assert_ne!(handles(&first), handles(&second), "fresh maps per load");
    // (The first load may hit too: the in-memory cache is process-wide.)
    assert!(second.program(prog).unwrap().compile_stats().cache_hit);
    let reference = LoadedObject::load(&object, &options(&state)).unwrap();
    let want = reference
        .test_run(prog, &pkt, &TestRunOptions::default())
        .unwrap();
    // The first object is dropped: nothing of its maps may be referenced.
    drop(first);
    let got = second
        .test_run(prog, &pkt, &TestRunOptions::default(), XdpEngine::Jit)
        .unwrap();
    assert_eq!((got.retval, &got.data_out), (want.retval, &want.data_out));
    assert_eq!(
        second.loaded().dump_state().unwrap(),
        reference.dump_state().unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The code constant-folded `.rodata`: an artifact whose recorded bytes
/// differ from the object's frozen value is refused, as is one whose map
/// layouts differ.
#[test]
fn artifacts_refuse_other_rodata_and_layouts() {
    let _turn = serial();
    let path = corpus_object("rate_limiter");
    let source = std::fs::read(&path).unwrap();
    let object = bpfjet_obj::load_file(&path).unwrap();
    let load = || LoadedObject::load(&object, &ObjectOptions::default()).unwrap();
    let artifact = AotArtifact::compile(
        &load(),
        &source,
        "rate_limiter",
        &[],
        &JitOptions::default(),
    )
    .unwrap();
    let frozen = artifact
        .maps
        .iter()
        .position(|m| m.frozen.is_some())
        .expect("rate_limiter has a frozen .rodata");
    let mut other_rodata = artifact.clone();
    if let Some(bytes) = other_rodata.maps[frozen].frozen.as_mut() {
        bytes[0] ^= 0xff;
    }
    let err = other_rodata.load(load()).unwrap_err();
    assert!(
        matches!(&err, AotError::Mismatch(m) if m.contains("frozen contents")),
        "{err}"
    );
    let mut other_layout = artifact.clone();
    other_layout.maps[0].max_entries += 1;
    let err = other_layout.load(load()).unwrap_err();
    assert!(
        matches!(&err, AotError::Mismatch(m) if m.contains(&artifact.maps[0].name)),
        "{err}"
    );
    // The untouched artifact loads.
    artifact.load(load()).unwrap();
}
