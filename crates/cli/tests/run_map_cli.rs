//! `bpfjet run` and `bpfjet map` as processes: generator and pcap runs,
//! output files, a truncated capture, SIGTERM teardown, and a control plane
//! in a second process changing a live firewall's verdicts.
//!
//! `BPFJET_BIN` overrides the binary under test.

mod support;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    std::env::var_os("BPFJET_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_bpfjet")))
}

fn bpfjet(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("run bpfjet")
}

fn firewall() -> (String, String) {
    let build = support::corpus_build_dir();
    let state = support::repo_root().join("examples/xdp/fixtures/firewall/state.json");
    (
        build.join("xdp/firewall.o").display().to_string(),
        state.display().to_string(),
    )
}

/// The last line of stdout as JSON.
fn summary(out: &Output) -> Value {
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().unwrap_or_else(|| {
        panic!(
            "no output; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

fn unique(tag: &str) -> String {
    format!("{tag}-{}", std::process::id())
}

fn shm_files(instance: &str) -> Vec<PathBuf> {
    let prefix = format!("bpfjet.{instance}.");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

fn wait_for_instance(child: &mut Child, instance: &str) {
    let registry = Path::new("/dev/shm").join(format!("bpfjet.{instance}.registry"));
    let start = Instant::now();
    while !registry.exists() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("bpfjet exited early: {status}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "instance never appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Packets the firewall's per-CPU `verdicts` map counted in `slot`, over
/// every CPU, read by a second process.
fn verdict_packets(instance: &str, slot: &str) -> u64 {
    let out = bpfjet(&[
        "map",
        "lookup",
        "--instance",
        instance,
        "verdicts",
        slot,
        "--json",
    ]);
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
        return 0;
    };
    v["values"]
        .as_array()
        .map(|values| {
            values
                .iter()
                .map(|h| {
                    let bytes =
                        bpfjet_maps::state::parse_hex(h.as_str().unwrap_or("")).unwrap_or_default();
                    bytes
                        .get(..8)
                        .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
                })
                .sum()
        })
        .unwrap_or(0)
}

/// `bpfjet run OBJ --maps STATE --name NAME EXTRA...` as a child process,
/// its output piped.
fn spawn_run(obj: &str, state: &str, name: &str, extra: &[&str]) -> Child {
    Command::new(bin())
        .args(["run", obj, "--maps", state, "--name", name])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting bpfjet run")
}

/// Send `signal` (`-TERM`, `-INT`) to `child` and collect its output.
fn stop(child: Child, signal: &str) -> Output {
    let killed = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .expect("running kill");
    assert!(killed.success(), "kill {signal} failed");
    child.wait_with_output().expect("waiting for bpfjet")
}

/// `out` exited 0; its stderr otherwise.
fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Poll `done` every 20 ms until it holds, failing with `what` after `secs`.
fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(secs), "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(unique(&format!("bpfjet-run-{tag}")));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn generator_run_counts_actions_in_json() {
    let (obj, state) = firewall();
    let name = unique("gen-json");
    let out = bpfjet(&[
        "run",
        &obj,
        "--maps",
        &state,
        "--name",
        &name,
        "--json",
        "--gen",
        "proto=udp,src=10.66.0.0/16,flows=100,count=20000",
    ]);
    assert_ok(&out);
    let s = summary(&out);
    assert_eq!(s["packets"], 20000);
    assert_eq!(s["actions"]["DROP"], 20000);
    for action in ["ABORTED", "PASS", "TX", "REDIRECT"] {
        assert_eq!(s["actions"][action], 0, "{action}");
    }
    assert!(shm_files(&name).is_empty(), "shared memory left behind");
}

#[test]
fn two_workers_split_the_generator_and_write_pcaps() {
    let (obj, state) = firewall();
    let dir = temp_dir("out");
    let out = bpfjet(&[
        "run",
        &obj,
        "--maps",
        &state,
        "--name",
        &unique("two-workers"),
        "--json",
        "--workers",
        "2",
        "--out",
        dir.to_str().unwrap(),
        "--gen",
        "proto=udp,src=192.168.0.0/16,flows=100,count=1001",
    ]);
    assert_ok(&out);
    let s = summary(&out);
    assert_eq!(s["packets"], 1001);
    assert_eq!(s["actions"]["PASS"], 1001);
    assert_eq!(s["workers"].as_array().unwrap().len(), 2);
    // pass.pcap holds every packet: 24-byte header + (16 + 64) per packet.
    let len = std::fs::metadata(dir.join("pass.pcap")).unwrap().len();
    assert_eq!(len, 24 + 1001 * (16 + 64));

    // Replaying that capture gives the same verdicts.
    let again = bpfjet(&[
        "run",
        &obj,
        "--maps",
        &state,
        "--name",
        &unique("replay"),
        "--json",
        "--pcap",
        dir.join("pass.pcap").to_str().unwrap(),
    ]);
    assert_ok(&again);
    assert_eq!(summary(&again)["actions"]["PASS"], 1001);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn truncated_pcap_reports_what_ran_and_exits_1() {
    let (obj, state) = firewall();
    let dir = temp_dir("trunc");
    let out = bpfjet(&[
        "run",
        &obj,
        "--maps",
        &state,
        "--name",
        &unique("trunc-src"),
        "--out",
        dir.to_str().unwrap(),
        "--gen",
        "src=192.168.0.0/16,count=100",
    ]);
    assert_ok(&out);
    let pcap = dir.join("pass.pcap");
    let bytes = std::fs::read(&pcap).unwrap();
    std::fs::write(&pcap, &bytes[..bytes.len() - 30]).unwrap();
    let out = bpfjet(&[
        "run",
        &obj,
        "--maps",
        &state,
        "--name",
        &unique("trunc"),
        "--json",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("truncated"), "{stderr}");
    let s = summary(&out);
    assert_eq!(s["packets"], 99, "the packets before the damage ran");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sigterm_ends_the_run_cleanly() {
    let (obj, state) = firewall();
    let name = unique("sigterm");
    let mut child = spawn_run(&obj, &state, &name, &["--json", "--gen", "count=unbounded"]);
    wait_for_instance(&mut child, &name);
    // Traffic flows once the default verdict (slot 0) counts packets.
    wait_until("no traffic counted", 30, || {
        verdict_packets(&name, "00000000") > 0
    });
    let out = stop(child, "-TERM");
    assert_ok(&out);
    let s = summary(&out);
    assert_eq!(s["stopped_by"], "SIGTERM");
    assert!(s["packets"].as_u64().unwrap() > 0);
    assert!(shm_files(&name).is_empty(), "shared memory left behind");
}

#[test]
fn a_taken_instance_name_is_refused() {
    let (obj, state) = firewall();
    let name = unique("taken");
    let mut first = spawn_run(
        &obj,
        &state,
        &name,
        &["--duration", "20", "--gen", "count=unbounded"],
    );
    wait_for_instance(&mut first, &name);
    let second = bpfjet(&["run", &obj, "--name", &name, "--gen", "count=10"]);
    stop(first, "-INT");
    assert_eq!(second.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");
}

/// The acceptance test of the control plane: a firewall runs on unbounded
/// blocked traffic; a second process lists and reads its maps, checks the
/// shared memory is private (0600), deletes the blocking rule, and the
/// running data plane starts passing the same traffic.
#[test]
fn a_second_process_changes_live_verdicts() {
    let (obj, state) = firewall();
    let name = unique("live");
    let mut child = spawn_run(
        &obj,
        &state,
        &name,
        &[
            "--json",
            "--duration",
            "60",
            "--gen",
            "proto=udp,src=10.66.0.0/16,flows=64,count=unbounded",
        ],
    );
    wait_for_instance(&mut child, &name);

    for file in shm_files(&name) {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} is {mode:o}", file.display());
    }

    let list = bpfjet(&["map", "list", "--instance", &name, "--json"]);
    assert_ok(&list);
    let maps: Value = serde_json::from_slice(&list.stdout).unwrap();
    let names: Vec<&str> = maps
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"blocked_v4") && names.contains(&"verdicts"),
        "{names:?}"
    );

    // Verdict slot 2 (FW_DROP_BLOCKED) counts per CPU; wait for traffic.
    wait_until("no drops counted", 20, || {
        verdict_packets(&name, "02000000") > 0
    });

    let lookup = bpfjet(&[
        "map",
        "lookup",
        "--instance",
        &name,
        "blocked_v4",
        "10000000 0a420000",
    ]);
    assert!(lookup.status.success());
    assert_eq!(
        String::from_utf8_lossy(&lookup.stdout).trim(),
        "0300000000000000"
    );

    let del = bpfjet(&[
        "map",
        "delete",
        "--instance",
        &name,
        "blocked_v4",
        "10000000 0a420000",
    ]);
    assert_ok(&del);
    let missing = bpfjet(&[
        "map",
        "lookup",
        "--instance",
        &name,
        "blocked_v4",
        "10000000 0a420000",
    ]);
    assert_eq!(missing.status.code(), Some(1));

    let dump = bpfjet(&["map", "dump", "--instance", &name, "blocked_v4"]);
    let dumped: Value = serde_json::from_slice(&dump.stdout).unwrap();
    assert_eq!(dumped["blocked_v4"].as_array().unwrap().len(), 2);

    // Passed traffic (slot 0, FW_PASS_DEFAULT) now grows.
    wait_until("the deleted rule still drops", 20, || {
        verdict_packets(&name, "00000000") > 0
    });

    let out = stop(child, "-INT");
    assert_ok(&out);
    let s = summary(&out);
    assert!(s["actions"]["DROP"].as_u64().unwrap() > 0);
    assert!(s["actions"]["PASS"].as_u64().unwrap() > 0);
    assert!(shm_files(&name).is_empty(), "shared memory left behind");

    let gone = bpfjet(&["map", "list", "--instance", &name]);
    assert_eq!(gone.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("no running instance"));
}

fn katran() -> (String, String) {
    let build = support::corpus_build_dir();
    (
        build.join("xdp/katran_lb.o").display().to_string(),
        build
            .join("xdp/fixtures/katran_lb/state.json")
            .display()
            .to_string(),
    )
}

fn typed(args: &[&str]) -> Value {
    let out = bpfjet(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `--typed`: katran's struct keys and values as JSON through the BTF the
/// running instance published, both ways.
#[test]
fn typed_keys_and_values_follow_the_btf() {
    let (obj, state) = katran();
    let name = unique("typed");
    let mut child = spawn_run(
        &obj,
        &state,
        &name,
        &[
            "--json",
            "--duration",
            "60",
            "--gen",
            "proto=udp,flows=64,count=unbounded",
        ],
    );
    wait_for_instance(&mut child, &name);
    let btf = Path::new("/dev/shm").join(format!("bpfjet.{name}.btf"));
    wait_until("no BTF published", 30, || btf.exists());

    let dump = typed(&[
        "map",
        "dump",
        "--instance",
        &name,
        "vip_map",
        "--typed",
        "--json",
    ]);
    let entries = dump["vip_map"].as_array().unwrap();
    let hex = typed(&["map", "dump", "--instance", &name, "vip_map", "--json"]);
    assert_eq!(entries.len(), hex["vip_map"].as_array().unwrap().len());
    let first = &entries[0];
    // struct vip_definition { __be32 addr[4]; __u16 port; __u8 proto; ... }
    assert_eq!(first["key"]["addr"].as_array().unwrap().len(), 4, "{first}");
    assert!(first["value"]["vip_num"].is_u64(), "{first}");

    let key = first["key"].to_string();
    let got = typed(&[
        "map",
        "lookup",
        "--instance",
        &name,
        "vip_map",
        &key,
        "--typed",
        "--json",
    ]);
    assert_eq!(got["value"], first["value"]);

    let mut value = first["value"].clone();
    value["vip_num"] = 77.into();
    typed(&[
        "map",
        "update",
        "--instance",
        &name,
        "vip_map",
        &key,
        &value.to_string(),
        "--typed",
        "--json",
    ]);
    let got = typed(&[
        "map",
        "lookup",
        "--instance",
        &name,
        "vip_map",
        &key,
        "--typed",
        "--json",
    ]);
    assert_eq!(got["value"]["vip_num"], 77);

    let bad = bpfjet(&[
        "map",
        "update",
        "--instance",
        &name,
        "vip_map",
        &key,
        r#"{"vip_nmu":1}"#,
        "--typed",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("unknown member") && err.contains("vip_num"),
        "{err}"
    );
    let big = bpfjet(&[
        "map",
        "update",
        "--instance",
        &name,
        "vip_map",
        &key,
        r#"{"vip_num":-1}"#,
        "--typed",
    ]);
    assert_eq!(big.status.code(), Some(1));

    let out = stop(child, "-TERM");
    assert_ok(&out);
    assert!(!btf.exists(), "published BTF left behind");
    assert!(shm_files(&name).is_empty(), "{:?}", shm_files(&name));
}
