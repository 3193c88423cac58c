//! `Object::spin_locks`: the offset of a map value's `struct bpf_spin_lock`,
//! read from the value's BTF type, and the placements the kernel refuses.

mod common;

use bpfjet_obj::ObjError;

#[test]
fn lock_offsets_from_value_btf() {
    let obj = common::load("spin_lock");
    assert_eq!(obj.spin_locks.len(), obj.maps.len());
    let at = |name: &str| obj.spin_locks[obj.map_index(name).unwrap()];
    assert_eq!(at("late"), Some(8));
    assert_eq!(at("first"), Some(0));
    assert_eq!(at("plain"), None);
    assert_eq!(at("deep"), Some(16));
}

/// The kernel refuses the object's BTF (-E2BIG); bpfjet refuses the object
/// with a message naming the map rather than silently dropping every lock.
fn refused(define: &str) -> String {
    let bytes = common::compile_with("spin_lock", &["-target", "bpf", define]);
    match bpfjet_obj::load(&bytes) {
        Err(e @ ObjError::InvalidMap { .. }) => e.to_string(),
        other => panic!("{define}: expected an InvalidMap error, got {other:?}"),
    }
}

#[test]
fn two_locks_in_one_value_are_refused() {
    let msg = refused("-DTWO_LOCKS");
    assert!(msg.contains("more than one bpf_spin_lock"), "{msg}");
}

/// The kernel refuses BTF with a lock for an LRU hash; libbpf then creates
/// the map without BTF, so there is no lock to take.
#[test]
fn lock_in_lru_hash_is_not_a_lock() {
    let bytes = common::compile_with("spin_lock", &["-target", "bpf", "-DLRU_LOCK"]);
    let obj = bpfjet_obj::load(&bytes).unwrap();
    assert_eq!(obj.spin_locks[obj.map_index("bad").unwrap()], None);
    assert_eq!(obj.spin_locks[obj.map_index("late").unwrap()], Some(8));
}
