//! The x86-64 system-call table (`tracepoint/syscalls/sys_enter_NAME` needs
//! NAME → number), generated from the kernel UAPI header the build host has
//! (linux-libc-dev), so it is never hand-copied.

use std::fmt::Write;

fn main() {
    let header = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h";
    println!("cargo:rerun-if-changed={header}");
    let text = std::fs::read_to_string(header)
        .unwrap_or_else(|e| panic!("{header}: {e} (install linux-libc-dev)"));
    let mut table = String::from("/// (name, number) of every x86-64 system call.\npub static SYSCALLS: &[(&str, u32)] = &[\n");
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if let (Some("#define"), Some(name), Some(nr)) = (w.next(), w.next(), w.next()) {
            if let (Some(name), Ok(nr)) = (name.strip_prefix("__NR_"), nr.parse::<u32>()) {
                writeln!(table, "    ({name:?}, {nr}),").unwrap();
            }
        }
    }
    table.push_str("];\n");
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("syscall_table.rs");
    std::fs::write(out, table).unwrap();
}
