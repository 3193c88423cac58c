//! Kfunc calls: argument checking from a prototype table, references, the
//! unknown-kfunc error, and the kernel's XDP metadata kfuncs (refused by the
//! kernel and bpfjet alike outside device-bound programs).

mod common;

use bpfjet_verifier::{verify, KfuncArg, KfuncFlags, KfuncProto, KfuncRet, VerifyEnv};

const NONE: KfuncArg = KfuncArg::None;

/// A test library: `sum(void *p, u32 sz)`, `get(u64 key)` acquiring 16
/// bytes or NULL, `put(void *obj)` releasing them.
const LIB: &[KfuncProto] = &[
    KfuncProto {
        name: "lib_sum",
        args: [KfuncArg::Mem, KfuncArg::Size, NONE, NONE, NONE],
        ret: KfuncRet::Integer,
        flags: KfuncFlags {
            acquire: false,
            ret_null: false,
            dev_bound: false,
        },
    },
    KfuncProto {
        name: "lib_get",
        args: [KfuncArg::Scalar, NONE, NONE, NONE, NONE],
        ret: KfuncRet::Mem(16),
        flags: KfuncFlags {
            acquire: true,
            ret_null: true,
            dev_bound: false,
        },
    },
    KfuncProto {
        name: "lib_put",
        args: [KfuncArg::Release, NONE, NONE, NONE, NONE],
        ret: KfuncRet::Void,
        flags: KfuncFlags {
            acquire: false,
            ret_null: false,
            dev_bound: false,
        },
    },
    // `void *lib_sized(u64 key, u32 size__szk)`: as many bytes as asked.
    KfuncProto {
        name: "lib_sized",
        args: [KfuncArg::Scalar, KfuncArg::KnownSize, NONE, NONE, NONE],
        ret: KfuncRet::MemOfArgSize(2),
        flags: KfuncFlags {
            acquire: true,
            ret_null: true,
            dev_bound: false,
        },
    },
];

fn names() -> Vec<String> {
    ["lib_sum", "lib_get", "lib_put", "lib_missing", "lib_sized"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// `Ok(())` or the rejection's rule and message.
fn run(asm: &str) -> Result<(), (String, String)> {
    let prog = bpfjet_isa::assemble(asm).unwrap();
    let kfuncs = names();
    let mut env = VerifyEnv::new(&[]);
    env.kfuncs = &kfuncs;
    env.extra_kfuncs = LIB;
    verify(&prog, &env)
        .map(|_| ())
        .map_err(|e| (e.rule.to_string(), e.message))
}

#[test]
fn mem_and_size_pair() {
    let ok = "stdw [%r10-8], 1\n stdw [%r10-16], 2\n mov %r1, %r10\n add %r1, -16\n mov %r2, 16\n \
              call kfunc 0\n mov %r0, 2\n exit";
    assert_eq!(run(ok), Ok(()));
    // 24 bytes from a 16-byte buffer at the top of the stack.
    let past = ok.replace("mov %r2, 16", "mov %r2, 24");
    let (rule, msg) = run(&past).unwrap_err();
    assert!(
        msg.contains("lib_sum") || rule.contains("stack"),
        "{rule}: {msg}"
    );
    // A scalar is not memory.
    let scalar = ok.replace("mov %r1, %r10\n add %r1, -16", "mov %r1, 64");
    assert_eq!(run(&scalar).unwrap_err().0, "bad_helper_arg");
    // A zero size is not a size.
    let zero = ok.replace("mov %r2, 16", "mov %r2, 0");
    assert_eq!(run(&zero).unwrap_err().0, "bad_size");
}

#[test]
fn scalar_argument_refuses_pointers() {
    let (rule, msg) = run("mov %r1, %r10\n call kfunc 1\n mov %r0, 2\n exit").unwrap_err();
    assert_eq!(rule, "bad_kfunc_arg", "{msg}");
    assert!(msg.contains("lib_get"), "{msg}");
}

#[test]
fn acquire_null_check_release() {
    let ok = "mov %r1, 7\n call kfunc 1\n jeq %r0, 0, out\n stdw [%r0+8], 1\n mov %r1, %r0\n call kfunc 2\n \
              out:\n mov %r0, 2\n exit";
    assert_eq!(run(ok), Ok(()));
    // Never released on the non-NULL path.
    let leak =
        "mov %r1, 7\n call kfunc 1\n jeq %r0, 0, out\n stdw [%r0+8], 1\n out:\n mov %r0, 2\n exit";
    assert_eq!(run(leak).unwrap_err().0, "ref_leak");
    // Used before the NULL check.
    let unchecked = "mov %r1, 7\n call kfunc 1\n stdw [%r0+8], 1\n mov %r1, %r0\n call kfunc 2\n mov %r0, 2\n exit";
    assert!(run(unchecked).is_err());
    // Out of the 16 acquired bytes.
    let oob = ok.replace("stdw [%r0+8], 1", "stdw [%r0+16], 1");
    assert!(run(&oob).is_err());
    // Released through a moved pointer.
    let moved = ok.replace("mov %r1, %r0\n", "mov %r1, %r0\n add %r1, 8\n");
    assert_eq!(run(&moved).unwrap_err().0, "bad_release");
    // Used after release.
    let uaf = ok
        .replace("call kfunc 2\n", "call kfunc 2\n stdw [%r6+0], 1\n")
        .replace("mov %r1, %r0\n", "mov %r1, %r0\n mov %r6, %r0\n");
    assert!(run(&uaf).is_err());
}

#[test]
fn unknown_kfunc_is_named() {
    let (rule, msg) = run("call kfunc 3\n mov %r0, 2\n exit").unwrap_err();
    assert_eq!(rule, "unknown_kfunc");
    assert!(msg.contains("lib_missing"), "{msg}");
    let (rule, _) = run("call kfunc 9\n mov %r0, 2\n exit").unwrap_err();
    assert_eq!(rule, "unknown_kfunc");
}

/// The kernel refuses `bpf_xdp_metadata_rx_hash` in a program that is not
/// bound to a device ("metadata kfuncs require device-bound program"); so
/// must bpfjet, naming the kfunc.
#[test]
fn xdp_metadata_kfunc_matches_kernel() {
    let path = common::verifier_example("xdp_rx_hash");
    let obj = bpfjet_obj::load_file(&path).unwrap();
    assert_eq!(obj.kfuncs, vec!["bpf_xdp_metadata_rx_hash".to_string()]);
    let prog = obj.program("xdp_rx_hash").unwrap();
    let insns = bpfjet_isa::decode_program(&prog.insns).unwrap();
    let mut env = VerifyEnv::new(&obj.maps);
    env.kfuncs = &obj.kfuncs;
    let e = verify(&insns, &env).unwrap_err();
    assert_eq!(e.rule, "kfunc_dev_bound", "{e}");
    assert!(e.message.contains("bpf_xdp_metadata_rx_hash"), "{e}");
    println!("bpfjet: {}", e.message);

    if let Err(why) = bpfjet_kernel::kernel_available() {
        bpfjet_testsupport::report_skip(format!("kernel side ({why})"));
        return;
    }
    match bpfjet_kernel::KernelObject::open(&path) {
        Ok(_) => {
            panic!("the kernel accepted a metadata kfunc in a program that is not device-bound")
        }
        Err(e) => {
            let text = format!(
                "{e}\n{}\n{}",
                e.verifier_log().unwrap_or(""),
                match &e {
                    bpfjet_kernel::KernelError::Load { libbpf_log, .. } => libbpf_log.as_str(),
                    _ => "",
                }
            );
            println!(
                "kernel: {}",
                text.lines()
                    .rev()
                    .find(|l| l.contains("device-bound"))
                    .unwrap_or(&text)
            );
            assert!(
                text.contains("device-bound"),
                "kernel refused for another reason: {text}"
            );
        }
    }
}

/// A `MapValue` argument: a NULL-checked map value is accepted, the
/// unchecked lookup result and a scalar are refused.
#[test]
fn map_value_argument() {
    const BUMP: &[KfuncProto] = &[KfuncProto {
        name: "lib_bump",
        args: [KfuncArg::MapValue, NONE, NONE, NONE, NONE],
        ret: KfuncRet::Void,
        flags: KfuncFlags {
            acquire: false,
            ret_null: false,
            dev_bound: false,
        },
    }];
    let maps = [bpfjet_maps::MapSpec::new(
        "m",
        bpfjet_maps::MapType::Hash,
        4,
        8,
        16,
    )];
    let kfuncs = vec!["lib_bump".to_string()];
    let run = |check: &str| {
        let asm = format!(
            "stw [%r10-4], 0\n lddw %r1, map_idx 0\n mov %r2, %r10\n add %r2, -4\n call 1\n \
             {check}\n mov %r1, %r0\n call kfunc 0\n out:\n mov %r0, 2\n exit"
        );
        let prog = bpfjet_isa::assemble(&asm).unwrap();
        let mut env = VerifyEnv::new(&maps);
        env.kfuncs = &kfuncs;
        env.extra_kfuncs = BUMP;
        verify(&prog, &env).map(|_| ()).map_err(|e| e.rule)
    };
    assert_eq!(run("jeq %r0, 0, out"), Ok(()));
    assert_eq!(run("ja +0").unwrap_err(), "bad_kfunc_arg");
    assert_eq!(run("mov %r0, 7").unwrap_err(), "bad_kfunc_arg");
}

/// `lib_fill(void *p, u32 sz)` writes its buffer; `lib_key(const key16 *)`
/// reads 16 bytes.
const WRITERS: &[KfuncProto] = &[
    KfuncProto {
        name: "lib_fill",
        args: [KfuncArg::MutMem, KfuncArg::Size, NONE, NONE, NONE],
        ret: KfuncRet::Integer,
        flags: KfuncFlags {
            acquire: false,
            ret_null: false,
            dev_bound: false,
        },
    },
    KfuncProto {
        name: "lib_key",
        args: [KfuncArg::InMem(16), NONE, NONE, NONE, NONE],
        ret: KfuncRet::Integer,
        flags: KfuncFlags {
            acquire: false,
            ret_null: false,
            dev_bound: false,
        },
    },
];

fn run_writers(asm: &str) -> Result<(), String> {
    let prog = bpfjet_isa::assemble(asm).unwrap();
    let kfuncs: Vec<String> = vec!["lib_fill".into(), "lib_key".into()];
    let mut env = VerifyEnv::new(&[]);
    env.kfuncs = &kfuncs;
    env.extra_kfuncs = WRITERS;
    verify(&prog, &env).map(|_| ()).map_err(|e| e.message)
}

#[test]
fn writable_memory_and_fixed_size_keys() {
    let fill =
        "stdw [%r10-8], 0\n stdw [%r10-16], 0\n mov %r1, %r10\n add %r1, -16\n mov %r2, 16\n \
                call kfunc 0\n mov %r0, 2\n exit";
    assert_eq!(run_writers(fill), Ok(()));
    let past = fill.replace("mov %r2, 16", "mov %r2, 32");
    let msg = run_writers(&past).unwrap_err();
    assert!(msg.contains("kfunc lib_fill"), "{msg}");
    // The writable buffer's size must be known: a pointer is not a size.
    let unsized_ = fill.replace("mov %r2, 16", "mov %r2, %r10");
    assert!(run_writers(&unsized_).is_err());

    let key = "stdw [%r10-8], 0\n stdw [%r10-16], 0\n mov %r1, %r10\n add %r1, -16\n \
               call kfunc 1\n mov %r0, 2\n exit";
    assert_eq!(run_writers(key), Ok(()));
    // 8 bytes are not a 16-byte key.
    let short = key.replace("add %r1, -16", "add %r1, -8");
    let msg = run_writers(&short).unwrap_err();
    assert!(msg.contains("kfunc lib_key"), "{msg}");
}

#[test]
fn result_sized_by_a_known_size_argument() {
    let ok = "mov %r6, %r1\n mov %r1, 7\n mov %r2, 24\n call kfunc 4\n jeq %r0, 0, out\n stdw [%r0+16], 1\n \
              mov %r1, %r0\n call kfunc 2\n out:\n mov %r0, 2\n exit";
    assert_eq!(run(ok), Ok(()));
    // Past the 24 bytes asked for.
    let past = ok.replace("stdw [%r0+16], 1", "stdw [%r0+24], 1");
    assert!(run(&past).is_err());
    // Smaller: 16 bytes do not reach offset 16.
    assert!(run(&ok.replace("mov %r2, 24", "mov %r2, 16")).is_err());
    // A size the verifier does not know, zero, or a pointer.
    for bad in [
        "ldxw %r2, [%r6+12]\n and %r2, 31",
        "mov %r2, 0",
        "mov %r2, %r10",
    ] {
        let prog = ok.replace("mov %r2, 24", bad);
        let (rule, msg) = run(&prog).unwrap_err();
        assert_eq!(rule, "bad_kfunc_arg", "{bad}: {msg}");
        assert!(
            msg.contains("argument 2 of kfunc lib_sized"),
            "{bad}: {msg}"
        );
    }
}
