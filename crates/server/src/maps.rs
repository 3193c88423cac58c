//! The map commands on a bpfjet map.

use crate::objects::Access;
use crate::user;
use bpfjet_maps::{Map, MapError, MapType};
use bpfjet_sys::{Errno, MapElem};

const BPF_F_LOCK: u64 = 4;

pub fn errno(e: &MapError) -> Errno {
    Errno(e.errno())
}

/// Bytes of one value as user space passes it: per-CPU maps carry one
/// 8-byte aligned slot per possible CPU.
fn value_len(map: &Map) -> usize {
    if map.map_type().is_per_cpu() {
        (map.value_size() as usize).next_multiple_of(8) * map.ncpus() as usize
    } else {
        map.value_size() as usize
    }
}

fn has_keys(map: &Map) -> bool {
    !matches!(
        map.map_type(),
        MapType::Queue | MapType::Stack | MapType::BloomFilter | MapType::Ringbuf
    )
}

/// The syscall's own check, before any map type's: `BPF_F_LOCK` needs a
/// `bpf_spin_lock` in the value (`map_lookup_elem`, `map_update_elem`,
/// `map_lookup_and_delete_elem`).
fn check_lock_flag(map: &Map, flags: u64) -> Result<(), Errno> {
    if flags & BPF_F_LOCK != 0 && map.spin_lock_off().is_none() {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

/// `map_get_sys_perms`: may this fd read the map?
pub fn readable(map: &Map, access: Access) -> Result<(), Errno> {
    if !access.read {
        return Err(Errno::EPERM);
    }
    map.check_readable().map_err(|e| errno(&e))
}

/// May this fd write the map (an fd with write access, a map not frozen)?
pub fn writable(map: &Map, access: Access) -> Result<(), Errno> {
    if !access.write {
        return Err(Errno::EPERM);
    }
    map.check_writable().map_err(|e| errno(&e))
}

fn key<'a>(map: &Map, addr: u64) -> Result<&'a [u8], Errno> {
    user::slice(addr, map.key_size() as usize)
}

/// `BPF_MAP_LOOKUP_ELEM`, checked in the kernel's order: unknown flags,
/// read permission, a lock flag without a lock.
pub fn lookup(map: &Map, access: Access, e: &MapElem) -> Result<(), Errno> {
    if e.flags & !BPF_F_LOCK != 0 {
        return Err(Errno::EINVAL);
    }
    readable(map, access)?;
    check_lock_flag(map, e.flags)?;
    if !has_keys(map) {
        // Queue/stack lookup is peek; bloom lookup is a membership test
        // with the value.
        return match map.map_type() {
            MapType::Queue | MapType::Stack => {
                let mut out = vec![0u8; map.value_size() as usize];
                map.peek(&mut out).map_err(|e| errno(&e))?;
                user::write(e.value, &out)
            }
            MapType::BloomFilter => {
                let mut v = user::read(e.value, map.value_size() as usize)?;
                map.peek(&mut v).map_err(|e| errno(&e))
            }
            _ => Err(Errno::ENOTSUPP),
        };
    }
    let k = key(map, e.key)?;
    if map.map_type().is_per_cpu() {
        let stride = (map.value_size() as usize).next_multiple_of(8);
        let values = map.lookup_percpu_slots(k).map_err(|e| errno(&e))?;
        let mut out = vec![0u8; value_len(map)];
        for (i, v) in values.iter().enumerate() {
            out[i * stride..i * stride + v.len()].copy_from_slice(v);
        }
        return user::write(e.value, &out);
    }
    let v = map.lookup_copy_flags(k, e.flags).map_err(|e| errno(&e))?;
    user::write(e.value, &v)
}

/// `BPF_MAP_UPDATE_ELEM`: write permission, a lock flag without a lock,
/// then the map type's rules.
pub fn update(map: &Map, access: Access, e: &MapElem) -> Result<(), Errno> {
    writable(map, access)?;
    check_lock_flag(map, e.flags)?;
    if !has_keys(map) {
        let v = user::slice(e.value, map.value_size() as usize)?;
        return map.push(v, e.flags).map_err(|e| errno(&e));
    }
    let k = key(map, e.key)?;
    let v = user::slice(e.value, value_len(map))?;
    if map.map_type().is_per_cpu() {
        // Whole 8-byte slots: the kernel keeps their padding.
        let stride = (map.value_size() as usize).next_multiple_of(8);
        let slots: Vec<&[u8]> = v.chunks(stride).collect();
        return map.update_percpu(k, &slots, e.flags).map_err(|e| errno(&e));
    }
    map.update_elem(k, v, e.flags).map_err(|e| errno(&e))
}

pub fn delete(map: &Map, access: Access, e: &MapElem) -> Result<(), Errno> {
    writable(map, access)?;
    if !has_keys(map) {
        return Err(Errno::EINVAL);
    }
    map.delete_elem(key(map, e.key)?).map_err(|e| errno(&e))
}

pub fn next_key(map: &Map, access: Access, e: &MapElem) -> Result<(), Errno> {
    readable(map, access)?;
    let k = if e.key == 0 {
        None
    } else {
        Some(key(map, e.key)?)
    };
    let next = map.get_next_key(k).map_err(|e| errno(&e))?;
    user::write(e.value, &next)
}

pub fn lookup_and_delete(map: &Map, access: Access, e: &MapElem) -> Result<(), Errno> {
    // The kernel's order: unknown flags, read and write permission, any
    // flag on a queue or stack, a lock flag without a lock, the map type.
    if e.flags & !BPF_F_LOCK != 0 {
        return Err(Errno::EINVAL);
    }
    readable(map, access)?;
    writable(map, access)?;
    if e.flags != 0 && matches!(map.map_type(), MapType::Queue | MapType::Stack) {
        return Err(Errno::EINVAL);
    }
    check_lock_flag(map, e.flags)?;
    match map.map_type() {
        MapType::Queue | MapType::Stack => {
            let v = map.pop_elem().map_err(|e| errno(&e))?;
            user::write(e.value, &v)
        }
        MapType::Hash | MapType::PercpuHash | MapType::LruHash | MapType::LruPercpuHash => {
            lookup(map, access, e)?;
            delete(map, access, e)
        }
        _ => Err(Errno::ENOTSUPP),
    }
}

pub fn freeze(map: &Map, access: Access) -> Result<(), Errno> {
    // A frozen map's fds lose write permission, which the kernel checks
    // first: freezing again is EPERM, not EBUSY; so is freezing a map
    // user space may not write (BPF_F_RDONLY).
    writable(map, access)?;
    map.freeze();
    Ok(())
}

/// The batch operations. The position token (`in_batch`/`out_batch`) is,
/// as in the kernel, opaque to user space: a `u32` count of elements
/// already returned for hash-like maps (the kernel's is a bucket index of
/// the same size), the last key for arrays (the kernel's generic batch).
/// Which batch commands a map type has (its `bpf_map_ops`), `ENOTSUPP`
/// for the others: arrays the generic lookup and update, LPM tries the
/// generic lookup, update and delete, hash maps all four.
fn has_batch(map: &Map, cmd: bpfjet_sys::Cmd) -> bool {
    use bpfjet_sys::Cmd;
    match map.map_type() {
        MapType::Array | MapType::PercpuArray => {
            matches!(cmd, Cmd::MapLookupBatch | Cmd::MapUpdateBatch)
        }
        MapType::LpmTrie => cmd != Cmd::MapLookupAndDeleteBatch,
        _ => has_keys(map),
    }
}

/// The batch commands, checked in the kernel's order (`bpf_map_do_batch`,
/// then the map's batch function): read or write permission, whether the
/// map type has the command, the element flags (`BPF_F_LOCK` only, and
/// only with a lock), a hash batch lookup's own flags; an update batch
/// zeroes the count before its first element, and a batch that stops at a
/// failing element says how many went through.
pub fn batch(
    map: &Map,
    access: Access,
    cmd: bpfjet_sys::Cmd,
    b: &bpfjet_sys::MapBatch,
) -> Result<(), Errno> {
    use bpfjet_sys::Cmd;
    if matches!(cmd, Cmd::MapLookupBatch | Cmd::MapLookupAndDeleteBatch) {
        readable(map, access)?;
    }
    if cmd != Cmd::MapLookupBatch {
        writable(map, access)?;
    }
    if !has_batch(map, cmd) {
        return Err(Errno::ENOTSUPP);
    }
    if b.elem_flags & !BPF_F_LOCK != 0 {
        return Err(Errno::EINVAL);
    }
    check_lock_flag(map, b.elem_flags)?;
    let want = b.count.get() as usize;
    let ks = map.key_size() as usize;
    let vs = value_len(map);
    // The generic batches (arrays, LPM tries, every update and delete).
    let array = matches!(
        map.map_type(),
        MapType::Array | MapType::PercpuArray | MapType::LpmTrie
    );
    if !array && matches!(cmd, Cmd::MapLookupBatch | Cmd::MapLookupAndDeleteBatch) && b.flags != 0 {
        return Err(Errno::EINVAL);
    }
    match cmd {
        Cmd::MapUpdateBatch | Cmd::MapDeleteBatch => {
            if want == 0 {
                return Ok(());
            }
            if cmd == Cmd::MapUpdateBatch {
                b.count.set(0);
            }
            let mut done = 0;
            let mut result = Ok(());
            for i in 0..want {
                let e = MapElem {
                    map_fd: b.map_fd,
                    key: b.keys + (i * ks) as u64,
                    value: if cmd == Cmd::MapUpdateBatch {
                        b.values + (i * vs) as u64
                    } else {
                        0
                    },
                    flags: b.elem_flags,
                };
                result = if cmd == Cmd::MapUpdateBatch {
                    update(map, access, &e)
                } else {
                    delete(map, access, &e)
                };
                if result.is_err() {
                    break;
                }
                done += 1;
            }
            b.count.set(done);
            result
        }
        Cmd::MapLookupBatch | Cmd::MapLookupAndDeleteBatch => {
            if want == 0 {
                return Err(Errno::EINVAL);
            }
            let tok = if array { ks } else { 4 };
            // Where the previous call stopped.
            let (mut prev, skip): (Option<Vec<u8>>, u32) = match (b.in_batch, array) {
                (0, _) => (None, 0),
                (a, true) => (Some(user::read(a, tok)?), 0),
                (a, false) => {
                    let t = user::read(a, 4)?;
                    (None, u32::from_ne_bytes(t[..4].try_into().unwrap()))
                }
            };
            // Hash-like maps: walk past what earlier calls returned
            // (deleted ones are gone, so they are not skipped again).
            let skip = if cmd == Cmd::MapLookupAndDeleteBatch {
                0
            } else {
                skip
            };
            for _ in 0..skip {
                match map.get_next_key(prev.as_deref()) {
                    Ok(k) => prev = Some(k),
                    Err(_) => return Err(Errno::ENOENT),
                }
            }
            let mut keys = Vec::new();
            let mut values = Vec::new();
            let mut last = prev.clone();
            let mut n = 0usize;
            let mut cur = prev;
            while n < want {
                let Ok(k) = map.get_next_key(cur.as_deref()) else {
                    break;
                };
                let mut v = vec![0u8; vs];
                let e = MapElem {
                    map_fd: b.map_fd,
                    key: k.as_ptr() as u64,
                    value: v.as_mut_ptr() as u64,
                    flags: b.elem_flags,
                };
                lookup(map, access, &e)?;
                keys.extend_from_slice(&k);
                values.extend_from_slice(&v);
                last = Some(k.clone());
                cur = Some(k);
                n += 1;
            }
            if cmd == Cmd::MapLookupAndDeleteBatch {
                for k in keys.chunks(ks) {
                    map.delete_elem(k).map_err(|e| errno(&e))?;
                }
            }
            user::write(b.keys, &keys)?;
            user::write(b.values, &values)?;
            let token = if array {
                last.unwrap_or_default()
            } else {
                (skip + n as u32).to_ne_bytes().to_vec()
            };
            if b.out_batch != 0 && !token.is_empty() {
                user::write(b.out_batch, &token)?;
            }
            b.count.set(n as u32);
            // The generic (array) batch ends with an empty call; the hash
            // batch with the call that reaches the end.
            let exhausted = !array && (n < want || map.get_next_key(cur.as_deref()).is_err());
            if n == 0 || exhausted {
                return Err(Errno::ENOENT);
            }
            Ok(())
        }
        _ => Err(Errno::EINVAL),
    }
}
