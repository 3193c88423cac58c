//! `bpfjet replace` against a live `bpfjet run --gen` on the interpreter
//! and the JIT: the program switches between batches while traffic flows,
//! maps with an unchanged layout keep their contents, changed ones are
//! created fresh, and an object the verifier rejects is refused with the
//! old program still running.
//!
//! The three programs are compiled here from the C below (clang-19, as
//! `make -C examples`). Each counts the packets it processed in its own
//! slot of the shared `counts` array, so the counters tell which program
//! ran each packet; the run's summary must agree with them exactly.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const COMMON: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __type(key, __u32);
    __type(value, __u64);
    __uint(max_entries, 4);
} counts SEC(".maps");
static __always_inline void count(__u32 slot) {
    __u64 *c = bpf_map_lookup_elem(&counts, &slot);
    if (c)
        __sync_fetch_and_add(c, 1);
}
char LICENSE[] SEC("license") = "GPL";
"#;

/// Drops, counting in slot 1; `shape` has u64 values.
const V1: &str = r#"
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __type(key, __u32);
    __type(value, __u64);
    __uint(max_entries, 16);
} shape SEC(".maps");
SEC("xdp") int v1(struct xdp_md *ctx) {
    __u32 k = 0; __u64 one = 1;
    bpf_map_update_elem(&shape, &k, &one, BPF_ANY);
    count(1);
    return XDP_DROP;
}
"#;

/// Passes, counting in slot 2; `shape` now has u32 values (a new layout)
/// and `extra` is new.
const V2: &str = r#"
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __type(key, __u32);
    __type(value, __u32);
    __uint(max_entries, 16);
} shape SEC(".maps");
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __type(key, __u32);
    __type(value, __u32);
    __uint(max_entries, 1);
} extra SEC(".maps");
SEC("xdp") int v2(struct xdp_md *ctx) {
    __u32 k = 0, v = 2;
    bpf_map_update_elem(&shape, &k, &v, BPF_ANY);
    count(2);
    return XDP_PASS;
}
"#;

/// Reads the packet without a bounds check: the verifier must refuse it.
const BAD: &str = r#"
SEC("xdp") int bad(struct xdp_md *ctx) {
    unsigned char *data = (void *)(long)ctx->data;
    count(3);
    return data[40] ? XDP_DROP : XDP_PASS;
}
"#;

fn bin() -> PathBuf {
    std::env::var_os("BPFJET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_bpfjet")))
}

fn bpfjet(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run bpfjet")
}

fn compile(dir: &Path, name: &str, body: &str) -> String {
    let obj = dir.join(format!("{name}.o"));
    bpfjet_testsupport::Compile::text(name, &format!("{COMMON}{body}")).object_at(&obj);
    obj.display().to_string()
}

/// `counts[slot]` read by a second process.
fn count(instance: &str, slot: u32) -> u64 {
    let key = bpfjet_maps::state::to_hex(&slot.to_ne_bytes());
    let out = bpfjet(&[
        "map",
        "lookup",
        "--instance",
        instance,
        "counts",
        &key,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "map lookup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = bpfjet_maps::state::parse_hex(v["value"].as_str().unwrap()).unwrap();
    u64::from_ne_bytes(bytes[..8].try_into().unwrap())
}

fn wait_until(what: &str, child: &mut Child, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("bpfjet run exited early ({status}) waiting for {what}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn replace(instance: &str, obj: &str) -> (Output, Value) {
    let out = bpfjet(&["replace", "--instance", instance, obj, "--json"]);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {} stderr {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, v)
}

fn names(v: &Value) -> Vec<&str> {
    let mut n: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    n.sort_unstable();
    n
}

fn hot_replace(engine: &str) {
    // The corpus build makes sure clang-19 and the BPF headers work.
    support::corpus_build_dir();
    let dir = std::env::temp_dir().join(format!("bpfjet-replace-{engine}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = compile(&dir, "v1", V1);
    let v2 = compile(&dir, "v2", V2);
    let bad = compile(&dir, "bad", BAD);
    let instance = format!("replace-{engine}-{}", std::process::id());
    let mut child = Command::new(bin())
        .args([
            "run", &v1, "--engine", engine, "--name", &instance, "--force",
        ])
        .args([
            "--gen",
            "proto=udp,flows=64,count=unbounded",
            "--workers",
            "2",
        ])
        .args(["--duration", "300", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let socket = PathBuf::from(format!("/dev/shm/bpfjet.{instance}.ctl"));
    wait_until("the control socket", &mut child, || socket.exists());
    wait_until("v1 traffic", &mut child, || count(&instance, 1) > 0);
    // A control plane's write to a map that stays.
    let marker = bpfjet_maps::state::to_hex(&777u64.to_ne_bytes());
    let key0 = bpfjet_maps::state::to_hex(&0u32.to_ne_bytes());
    let out = bpfjet(&[
        "map",
        "update",
        "--instance",
        &instance,
        "counts",
        &key0,
        &marker,
    ]);
    assert!(out.status.success());

    // Refused: exit 1 with the verifier's message, v1 keeps running.
    let (out, reply) = replace(&instance, &bad);
    assert_eq!(out.status.code(), Some(1), "bad object accepted: {reply}");
    assert_eq!(reply["ok"], false);
    let error = reply["error"].as_str().unwrap();
    assert!(
        error.contains("\"bad\" rejected by the verifier") && error.contains("pkt_out_of_range"),
        "{error}"
    );
    let before = count(&instance, 1);
    wait_until("v1 traffic after the refusal", &mut child, || {
        count(&instance, 1) > before
    });
    assert_eq!(count(&instance, 3), 0, "the refused program ran");

    // Accepted while traffic flows.
    let (out, reply) = replace(&instance, &v2);
    assert!(out.status.success(), "replace failed: {reply}");
    assert_eq!(reply["ok"], true);
    assert_eq!(reply["generation"], 1);
    assert_eq!(reply["program"], "v2");
    assert_eq!(names(&reply["maps"]["kept"]), ["counts"]);
    assert_eq!(names(&reply["maps"]["created"]), ["extra", "shape"]);
    assert_eq!(names(&reply["maps"]["dropped"]), ["shape"]);
    // Every worker acknowledged the switch before the reply: v1 has
    // stopped counting for good, v2 counts.
    let v1_final = count(&instance, 1);
    wait_until("v2 traffic", &mut child, || count(&instance, 2) > 1000);
    assert_eq!(count(&instance, 1), v1_final, "v1 ran after the switch");
    assert_eq!(count(&instance, 0), 777, "a kept map lost its contents");
    // The instance now holds the new `shape` (u32 values) only.
    let out = bpfjet(&["map", "list", "--instance", &instance, "--json"]);
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let shapes: Vec<&Value> = list
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] == "shape")
        .collect();
    assert_eq!(shapes.len(), 1, "{list}");
    assert_eq!(shapes[0]["value_size"], 4);

    // SIGTERM: the summary's actions are exactly what each program counted.
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["replaces"], 1);
    assert_eq!(summary["program"], "v2");
    assert_eq!(summary["actions"]["DROP"], v1_final);
    let passed = summary["actions"]["PASS"].as_u64().unwrap();
    assert!(passed > 1000, "{summary}");
    assert_eq!(summary["actions"]["ABORTED"], 0);
    assert!(!socket.exists(), "control socket left behind");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hot_replace_on_the_interpreter() {
    hot_replace("interp");
}

#[test]
fn hot_replace_on_the_jit() {
    hot_replace("jit");
}

/// A run of `obj` with `--gen` and `--json`, its JIT cache in `cache` (a
/// fresh directory: the replacement is compiled cold, which takes a
/// noticeable fraction of a second for Katran).
fn spawn_run(obj: &str, instance: &str, cache: &Path, extra: &[&str]) -> Child {
    Command::new(bin())
        .args(["run", obj, "--engine", "jit", "--name", instance, "--force"])
        .args(["--gen", "proto=udp,flows=64,count=unbounded", "--json"])
        .args(extra)
        .env("XDG_CACHE_HOME", cache)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The instance's shared-memory objects still present.
fn leftovers(instance: &str) -> Vec<String> {
    let prefix = format!("bpfjet.{instance}.");
    std::fs::read_dir("/dev/shm")
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// A replace compiling a large program runs off the run loop: the status
/// line keeps coming and `--duration` ends the run on time.
#[test]
fn a_replace_does_not_hold_up_the_run() {
    let build = support::corpus_build_dir();
    let katran = build.join("verifier/katran_full.o").display().to_string();
    let dir = std::env::temp_dir().join(format!("bpfjet-replace-slow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = compile(&dir, "v1", V1);
    let instance = format!("replace-slow-{}", std::process::id());
    let started = Instant::now();
    let mut child = spawn_run(&v1, &instance, &dir, &["--duration", "6"]);
    let socket = PathBuf::from(format!("/dev/shm/bpfjet.{instance}.ctl"));
    wait_until("the control socket", &mut child, || socket.exists());
    let ready = started.elapsed();
    // The run's clock starts once it serves: replace at t = 1 s of it.
    std::thread::sleep(Duration::from_secs(1));
    let asked = Instant::now();
    let (out, reply) = replace(&instance, &katran);
    let took = asked.elapsed();
    assert!(out.status.success(), "replace failed: {reply}");
    assert_eq!(reply["program"], "katran_full");
    let out = child.wait_with_output().unwrap();
    let ran = started.elapsed() - ready;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        ran < Duration::from_millis(7500),
        "--duration 6 ended after {ran:?} (the replace took {took:?})\n{stderr}"
    );
    let summary: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(summary["stopped_by"], "duration elapsed");
    assert_eq!(summary["replaces"], 1);
    assert_eq!(summary["program"], "katran_full");
    // One status line a second (stderr is not a terminal): a run loop
    // blocked by the compile would have printed fewer than its 6 s' worth.
    let status_lines = stderr.lines().filter(|l| l.contains(" Mpps |")).count();
    assert!(status_lines >= 4, "{status_lines} status lines\n{stderr}");
    assert!(
        leftovers(&instance).is_empty(),
        "{:?}",
        leftovers(&instance)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGINT while the replacement is still compiling: the run stops at once
/// with the old program, the client is told nothing was replaced, and
/// neither the attempt's maps nor the control socket are left behind.
#[test]
fn a_signal_during_a_replace_tears_down_cleanly() {
    use std::io::{BufRead, BufReader, Write};
    let build = support::corpus_build_dir();
    let katran = build.join("verifier/katran_full.o");
    let dir = std::env::temp_dir().join(format!("bpfjet-replace-int-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let v1 = compile(&dir, "v1", V1);
    let instance = format!("replace-int-{}", std::process::id());
    let mut child = spawn_run(&v1, &instance, &dir, &["--duration", "300"]);
    let socket = PathBuf::from(format!("/dev/shm/bpfjet.{instance}.ctl"));
    wait_until("the control socket", &mut child, || socket.exists());
    wait_until("v1 traffic", &mut child, || count(&instance, 1) > 0);
    // The request straight over the socket, so the signal follows it
    // within milliseconds: well inside Katran's cold compile.
    let stream = std::os::unix::net::UnixStream::connect(&socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let request = serde_json::json!({"op": "replace", "object": katran, "prog": null});
    (&stream)
        .write_all(format!("{request}\n").as_bytes())
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    let signalled = Instant::now();
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).unwrap();
    let reply: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(reply["ok"], false, "{reply}");
    assert!(
        reply["error"]
            .as_str()
            .unwrap()
            .contains("the run stopped before the new program was ready"),
        "{reply}"
    );
    let summary: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert!(
        summary["stopped_by"].as_str().unwrap().contains("SIGINT"),
        "{summary}"
    );
    assert_eq!(summary["replaces"], 0);
    assert_eq!(summary["program"], "v1");
    assert!(
        signalled.elapsed() < Duration::from_secs(30),
        "teardown took {:?}",
        signalled.elapsed()
    );
    assert!(!socket.exists(), "control socket left behind");
    assert!(
        leftovers(&instance).is_empty(),
        "{:?}",
        leftovers(&instance)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
