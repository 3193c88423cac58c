//! `bpf_probe_read_kernel` in a traced process reads what is kernel memory
//! in the kernel's model of the hit — the tracepoint record, which
//! libbpf-tools read with BPF_CORE_READ — and faults (`-EFAULT`, buffer
//! zeroed) on anything else: a user address, as in the kernel, and bytes
//! past the end of the record.

use bpfjet_runtime::tracing::{ProbeSite, SysEnterCtx, TracingObject, TracingOptions};
use std::path::PathBuf;
use std::process::Command;

const SOURCE: &str = r#"
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
struct rec { unsigned long long common; long id; unsigned long args[7]; };
struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 6);
         __type(key, __u32); __type(value, __s64); } out SEC(".maps");
static __always_inline void put(__u32 k, __s64 v) {
    __s64 *p = bpf_map_lookup_elem(&out, &k);
    if (p) *p = v;
}
SEC("tracepoint/syscalls/sys_enter_write")
int on_write(struct rec *ctx) {
    __s64 v = -1;
    long r = bpf_probe_read_kernel(&v, sizeof(v), &ctx->args[2]);
    put(0, r); put(1, v);
    /* args[1] is the user buffer: a user address, never kernel memory. */
    unsigned long buf = 0;
    bpf_probe_read_kernel(&buf, sizeof(buf), &ctx->args[1]);
    v = -1;
    r = bpf_probe_read_kernel(&v, sizeof(v), (void *)buf);
    put(2, r); put(3, v);
    /* args[6] lies past the 64-byte sys_enter record. */
    v = -1;
    r = bpf_probe_read_kernel(&v, sizeof(v), &ctx->args[6]);
    put(4, r); put(5, v);
    return 0;
}
char LICENSE[] SEC("license") = "GPL";
"#;

fn compile() -> bpfjet_obj::Object {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("probe_read_kernel");
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("prog.c");
    let obj = dir.join("prog.o");
    std::fs::write(&src, SOURCE).unwrap();
    let arch = format!("/usr/include/{}-linux-gnu", std::env::consts::ARCH);
    let out = Command::new("clang-19")
        .args(["-O2", "-g", "-target", "bpf", "-I", &arch, "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .expect("clang-19 (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    bpfjet_obj::load_file(&obj).unwrap()
}

#[test]
fn reads_the_record_and_faults_elsewhere() {
    let obj = compile();
    let tracing = TracingObject::load(&obj, &TracingOptions::default()).unwrap();
    let id = tracing.program_id("on_write").unwrap();
    let user_buf: u64 = 0x1122_3344_5566_7788;
    let mut rec = SysEnterCtx::new(1, [1, &user_buf as *const u64 as u64, 4242, 0, 0, 0]);
    tracing.run_sys_enter(id, &mut rec, &ProbeSite::default());
    assert_eq!(tracing.faults().0, 0, "{:?}", tracing.faults().1);
    let out = tracing.loaded().map("out").unwrap();
    let slot = |k: u32| {
        let v = out.lookup_copy(&k.to_le_bytes()).unwrap();
        i64::from_le_bytes(v[..8].try_into().unwrap())
    };
    const EFAULT: i64 = -14;
    assert_eq!((slot(0), slot(1)), (0, 4242), "the record's args[2]");
    assert_eq!((slot(2), slot(3)), (EFAULT, 0), "a user address");
    assert_eq!((slot(4), slot(5)), (EFAULT, 0), "past the record");
}
